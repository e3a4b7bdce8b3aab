"""What in a warm-capacity placeholder Deployment no longer matches the one Headroom writes
(pure functions over the objects): the GPUs its pods ask for and where they may run, the fields
that decide which nodes, and how many, it holds. A difference means someone edited it (kubectl
edit, a GitOps sync) and the pool holds other capacity than the plan's."""

from __future__ import annotations

from typing import Any

from controlplane.adapters.k8s.names import is_gpu_resource
from controlplane.adapters.k8s.quantity import count

JsonObject = dict[str, Any]
# pod-spec fields compared whole: the API server defaults none of them
_PINNED = ("affinity", "tolerations", "priorityClassName")
_RESET = ("containers", "nodeSelector", *_PINNED)


def _pod_spec(deployment: JsonObject) -> JsonObject:
    template = ((deployment.get("spec") or {}).get("template") or {})
    spec = template.get("spec")
    return spec if isinstance(spec, dict) else {}


def gpu_requests(deployment: JsonObject) -> dict[str, int]:
    """GPU-like resources one pod asks for (requests, else limits), summed over containers;
    an unparsable quantity counts -1 (never equal to a wanted count)."""
    wanted: dict[str, int] = {}
    for container in _pod_spec(deployment).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for resource, quantity in asked.items():
            if is_gpu_resource(resource):
                try:
                    units = count(quantity)
                except ValueError:
                    units = -1
                wanted[resource] = wanted.get(resource, 0) + units
    return wanted


def _resources(gpus: dict[str, int]) -> str:
    return ", ".join(f"{r}: {c}" for r, c in sorted(gpus.items())) or "no GPU"


def _selector(selector: object) -> str:
    pairs = sorted(selector.items()) if isinstance(selector, dict) else []
    return ", ".join(f"{k}={v}" for k, v in pairs) or "any node"


def placeholder_drift(wanted: JsonObject, actual: JsonObject) -> list[str]:
    """How ``actual`` (the placeholder Deployment read back) differs from ``wanted`` (the one
    Headroom writes) in what decides the capacity it holds; empty when it does not."""
    name = (wanted.get("metadata") or {}).get("name", "")
    what = f"placeholder Deployment {name}"
    changed = []
    have, want = gpu_requests(actual), gpu_requests(wanted)
    if have != want:
        changed.append(f"{what} asks for {_resources(have)}, not {_resources(want)}")
    spec, wanted_spec = _pod_spec(actual), _pod_spec(wanted)
    if (spec.get("nodeSelector") or {}) != (wanted_spec.get("nodeSelector") or {}):
        changed.append(f"{what} selects nodes {_selector(spec.get('nodeSelector'))}, not "
                       f"{_selector(wanted_spec.get('nodeSelector'))}")
    changed.extend(f"{what} {field} changed" for field in _PINNED
                   if spec.get(field) != wanted_spec.get(field))
    return changed


def reset_pod_template(wanted: JsonObject, actual: JsonObject) -> list[JsonObject]:
    """JSON patch (RFC 6902) operations that set ``actual``'s pod-template fields Headroom
    writes (containers, nodeSelector, affinity, tolerations, priorityClassName) to
    ``wanted``'s, whatever other managers added; only the fields that differ."""
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
