"""Whether a model's own Deployment / StatefulSet asks for the GPU resource of the slices the
plan places its replicas on (pure functions over the objects). A pod asking for another one
(``nvidia.com/gpu`` where the plan has a MIG ``1g.10gb`` instance, a MIG instance or a renamed
``.shared`` resource where it has a whole GPU) stays Pending or runs on other GPUs than the plan
counts, and nothing else says why. Headroom only reports it: the workload is the user's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controlplane.adapters.k8s.names import GPU_RESOURCE, MIG_RESOURCE_PREFIX, is_gpu_resource
from controlplane.adapters.k8s.quantity import count
from controlplane.domain.placement import PlannedSlice
from controlplane.domain.sharing_config import shared_resource

JsonObject = dict[str, Any]
SLICE_MISMATCH = "workload_slice_mismatch"
_SHARED_SUFFIX = ".shared"  # the device plugin's renameByDefault spelling of a share


def planned_request(planned: PlannedSlice, mig_strategy: str) -> dict[str, int] | None:
    """The GPU resource one replica on ``planned`` asks for, as the device plugin advertises
    the slice under Headroom's configs (REFERENCE.md §1.6, §2.1): a MIG instance as
    ``nvidia.com/mig-<profile>`` (``mixed`` strategy) or ``nvidia.com/gpu`` (``single``); a
    whole GPU as ``nvidia.com/gpu``; an MPS or time-slicing share as the resource Headroom's
    sharing configs advertise. None when the slice names no layout (the simulator's sizing)."""
    if planned.mig_profile:
        single = mig_strategy == "single"
        return {GPU_RESOURCE if single else MIG_RESOURCE_PREFIX + planned.mig_profile: 1}
    if planned.mode == "exclusive":
        return {GPU_RESOURCE: 1}
    if planned.mode in ("mps", "time_sliced"):
        return {shared_resource(): 1}
    return None


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


def _resources(gpus: dict[str, int]) -> str:
    return ", ".join(f"{r}: {c if c >= 0 else '(unparsable)'}"
                     for r, c in sorted(gpus.items())) or "no GPU"


def _slice(planned: PlannedSlice) -> str:
    if planned.mig_profile:
        return f"MIG {planned.mig_profile} instances of {planned.product}"
    if planned.mode == "mps":
        return f"MPS shares of {planned.product} GPUs"
    if planned.mode == "time_sliced":
        return f"time-sliced {planned.product} GPUs"
    return f"whole {planned.product} GPUs"


def slice_drift(model: str, kind: str, workload: JsonObject, planned: Sequence[PlannedSlice],
                mig_strategy: str) -> list[str]:
    """What in ``workload`` (the model's Deployment or StatefulSet read back) does not fit the
    slices the plan places the model's replicas on: one finding naming the workload, the GPU
    resources its pods ask for and those of the planned slices they do not match; empty when
    every planned slice's request is the pods' (slices that name no layout are not checked)."""
    expected = [(p, want) for p in planned
                if (want := planned_request(p, mig_strategy)) is not None]
    have = pod_gpu_requests(workload)
    unmatched = [(p, want) for p, want in expected if want != have]
    if not unmatched:
        return []
    total = sum(p.replicas for p, _ in expected)
    missed = sum(p.replicas for p, _ in unmatched)
    whose = (f"its {missed} replica{'s' if missed != 1 else ''}" if missed == total
             else f"{missed} of its {total} replicas")
    slices = [(p.replicas, f"{_slice(p)} ({_resources(want)} each)") for p, want in unmatched]
    where = (f"on {slices[0][1]}" if len(slices) == 1
             else "as " + " and ".join(f"{n} on {s}" for n, s in slices))
    meta = workload.get("metadata") or {}
    return [f"model {model}: {kind} {meta.get('namespace', '')}/{meta.get('name', '')} asks for "
            f"{_resources(have)} per pod, but the plan places {whose} {where}: they stay "
            "Pending or run on other GPUs than the plan counts. Headroom does not change the "
            f"workload: give its pods the planned slice's GPU resource; reason {SLICE_MISMATCH}"]
