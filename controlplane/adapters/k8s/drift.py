"""What in a warm-capacity placeholder Deployment no longer matches the one Headroom writes
(pure functions over the objects): the GPUs its pods ask for and where they may run, the fields
that decide which nodes, and how many, it holds, and the security contexts its pods need to be
admitted at all (Headroom's namespace enforces the restricted Pod Security level). A difference
means someone edited it (kubectl edit, a GitOps sync) and the pool holds other capacity than the
plan's, or none."""

from __future__ import annotations

from typing import Any

from controlplane.adapters.k8s.gpu_requests import pod_gpu_requests
from controlplane.domain.workload_slices import resources_text

JsonObject = dict[str, Any]
# pod-spec fields compared whole: the API server defaults none of them
_PINNED = ("affinity", "tolerations", "priorityClassName")
_RESET = ("containers", "nodeSelector", "securityContext", *_PINNED)


def _pod_spec(deployment: JsonObject) -> JsonObject:
    template = ((deployment.get("spec") or {}).get("template") or {})
    spec = template.get("spec")
    return spec if isinstance(spec, dict) else {}


def _security_contexts(spec: JsonObject) -> dict[str, object]:
    """The pod's securityContext ("pod") and each container's, by name."""
    found = {f"container {c.get('name')}": c.get("securityContext")
             for c in spec.get("containers") or [] if isinstance(c, dict)}
    return {"pod": spec.get("securityContext"), **found}


def _lacks(have: object, want: object) -> bool:
    """Whether ``have`` does not hold every field of ``want`` as ``want`` has it (fields the
    API server or another manager added, e.g. a defaulted procMount, do not count)."""
    if not isinstance(want, dict):
        return have != want
    return not isinstance(have, dict) or any(have.get(k) != v for k, v in want.items())


def _selector(selector: object) -> str:
    pairs = sorted(selector.items()) if isinstance(selector, dict) else []
    return ", ".join(f"{k}={v}" for k, v in pairs) or "any node"


def placeholder_drift(wanted: JsonObject, actual: JsonObject) -> list[str]:
    """How ``actual`` (the placeholder Deployment read back) differs from ``wanted`` (the one
    Headroom writes) in what decides the capacity it holds; empty when it does not."""
    name = (wanted.get("metadata") or {}).get("name", "")
    what = f"placeholder Deployment {name}"
    changed = []
    have, want = pod_gpu_requests(actual), pod_gpu_requests(wanted)
    if have != want:
        changed.append(f"{what} asks for {resources_text(have)}, not "
                       f"{resources_text(want) if want else 'none'}")
    spec, wanted_spec = _pod_spec(actual), _pod_spec(wanted)
    if (spec.get("nodeSelector") or {}) != (wanted_spec.get("nodeSelector") or {}):
        changed.append(f"{what} selects nodes {_selector(spec.get('nodeSelector'))}, not "
                       f"{_selector(wanted_spec.get('nodeSelector'))}")
    changed.extend(f"{what} {field} changed" for field in _PINNED
                   if spec.get(field) != wanted_spec.get(field))
    contexts = _security_contexts(spec)
    changed.extend(f"{what} {whose} securityContext changed"
                   for whose, wanted_context in _security_contexts(wanted_spec).items()
                   if _lacks(contexts.get(whose), wanted_context))
    return changed


def reset_pod_template(wanted: JsonObject, actual: JsonObject) -> list[JsonObject]:
    """JSON patch (RFC 6902) operations that set ``actual``'s pod-template fields Headroom
    writes (containers, nodeSelector, securityContext, affinity, tolerations,
    priorityClassName) to ``wanted``'s, whatever other managers added; only the fields that
    differ."""
    spec, wanted_spec = _pod_spec(actual), _pod_spec(wanted)
    operations: list[JsonObject] = []
    for field in _RESET:
        if spec.get(field) == wanted_spec.get(field):
            continue
        path = f"/spec/template/spec/{field}"
        if field in wanted_spec:
            operations.append({"op": "add", "path": path, "value": wanted_spec[field]})
        else:
            operations.append({"op": "remove", "path": path})
    return operations
