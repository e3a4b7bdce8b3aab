"""What in a warm-capacity placeholder Deployment no longer matches the one Headroom writes
(pure functions over the objects): the GPUs its pods ask for and where they may run, the fields
that decide which nodes, and how many, it holds. A difference means someone edited it (kubectl
edit, a GitOps sync) and the pool holds other capacity than the plan's."""

from __future__ import annotations

from typing import Any

from controlplane.adapters.k8s.names import GPU_RESOURCE, is_gpu_resource
from controlplane.adapters.k8s.quantity import count
from controlplane.domain.workload_slices import resources_text

JsonObject = dict[str, Any]
# pod-spec fields compared whole: the API server defaults none of them
_PINNED = ("affinity", "tolerations", "priorityClassName")
_RESET = ("containers", "nodeSelector", *_PINNED)
_SHARED_SUFFIX = ".shared"  # the device plugin's renameByDefault spelling of a share


def _pod_spec(deployment: JsonObject) -> JsonObject:
    template = ((deployment.get("spec") or {}).get("template") or {})
    spec = template.get("spec")
    return spec if isinstance(spec, dict) else {}


def _is_gpu_like(resource: str) -> bool:
    return is_gpu_resource(resource) or resource == GPU_RESOURCE + _SHARED_SUFFIX


def _container_gpus(container: JsonObject) -> dict[str, int]:
    """One container's GPU-like resources (requests, else limits: an extended resource's
    request defaults to its limit); an unparsable quantity counts -1."""
    resources = container.get("resources") or {}
    asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    gpus = {}
    for resource, quantity in asked.items():
        if _is_gpu_like(resource):
            try:
                gpus[resource] = count(quantity)
            except ValueError:
                gpus[resource] = -1
    return gpus


def pod_gpu_requests(workload: JsonObject) -> dict[str, int]:
    """The GPU-like resources one pod of ``workload`` asks the scheduler for: its containers'
    and sidecars' (init containers that keep running) summed, or an ordinary init container's
    when larger (it runs alone, before them); -1 when a quantity is unparsable."""
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    inits = spec.get("initContainers") or []
    sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
    total: dict[str, int] = {}
    for container in [*(spec.get("containers") or []), *sidecars]:
        for resource, units in _container_gpus(container).items():
            known = total.get(resource, 0)
            total[resource] = -1 if min(known, units) < 0 else known + units
    for container in inits:
        if container.get("restartPolicy") != "Always":
            for resource, units in _container_gpus(container).items():
                known = total.get(resource, 0)
                total[resource] = -1 if min(known, units) < 0 else max(known, units)
    return total


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
        changed.append(f"{what} asks for {resources_text(have)}, not {resources_text(want)}")
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
