"""The GPU-like resources a pod asks the scheduler for, counted as the scheduler counts them:
containers and sidecars (init containers that keep running) summed, or an ordinary init
container's when larger (it runs alone, before them). One reading for running pods (the
inventory) and for workload templates (slice and placeholder drift)."""

from __future__ import annotations

from typing import Any

from controlplane.adapters.k8s.names import is_gpu_resource
from controlplane.adapters.k8s.quantity import count

JsonObject = dict[str, Any]
UNPARSABLE = -1  # a quantity that is not a Kubernetes quantity


def _container_gpus(container: JsonObject) -> dict[str, int]:
    """One container's GPU-like resources (requests, else limits: an extended resource's
    request defaults to its limit); an unparsable quantity counts ``UNPARSABLE``."""
    resources = container.get("resources") or {}
    asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    gpus = {}
    for resource, quantity in asked.items():
        if is_gpu_resource(resource):
            try:
                gpus[resource] = count(quantity)
            except ValueError:
                gpus[resource] = UNPARSABLE
    return gpus


def spec_gpu_requests(spec: JsonObject) -> dict[str, int]:
    """What a pod with ``spec`` asks for, per GPU-like resource; ``UNPARSABLE`` where a
    quantity is not one."""
    inits = spec.get("initContainers") or []
    sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
    total: dict[str, int] = {}
    for container in [*(spec.get("containers") or []), *sidecars]:
        for resource, units in _container_gpus(container).items():
            known = total.get(resource, 0)
            total[resource] = UNPARSABLE if min(known, units) < 0 else known + units
    for container in inits:
        if container.get("restartPolicy") != "Always":
            for resource, units in _container_gpus(container).items():
                known = total.get(resource, 0)
                total[resource] = UNPARSABLE if min(known, units) < 0 else max(known, units)
    return total


def pod_gpu_requests(workload: JsonObject) -> dict[str, int]:
    """What one pod of ``workload`` (a Deployment, StatefulSet, ...) asks for."""
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec_gpu_requests(spec)
