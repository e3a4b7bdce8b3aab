"""Whether each model's own workload asks for the GPU resource of the slices the plan places its
replicas on (pure functions of values). A pod asking for another one (``nvidia.com/gpu`` where
the plan has a MIG ``1g.10gb`` instance, a MIG instance or a renamed ``.shared`` resource where it
has a whole GPU) stays Pending or runs on other GPUs than the plan counts, and nothing else says
why. Headroom only reports it, every tick until it is fixed: the workload is the user's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controlplane.domain.mig_relayout import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from controlplane.domain.observed import ObservedModel
from controlplane.domain.placement import FleetPlacement, PlannedSlice
from controlplane.domain.sharing_config import shared_resource

SLICE_MISMATCH = "workload_slice_mismatch"


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


def resources_text(gpus: Mapping[str, int]) -> str:
    """``nvidia.com/gpu: 1, ...`` (an unparsable quantity, counted -1, says so), or no GPU."""
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


def slice_finding(model: str, workload: str, have: Mapping[str, int],
                  planned: Sequence[PlannedSlice], mig_strategy: str) -> str | None:
    """What in ``workload`` (e.g. ``Deployment models/chat``), whose pods each ask for ``have``,
    does not fit the slices the plan places the model's replicas on: the GPU resources its pods
    ask for and those of the planned slices they do not match; None when every planned slice's
    request is the pods' (slices that name no layout are not checked)."""
    expected = [(p, want) for p in planned
                if (want := planned_request(p, mig_strategy)) is not None]
    unmatched = [(p, want) for p, want in expected if want != dict(have)]
    if not unmatched:
        return None
    total = sum(p.replicas for p, _ in expected)
    missed = sum(p.replicas for p, _ in unmatched)
    whose = (f"its {missed} replica{'s' if missed != 1 else ''}" if missed == total
             else f"{missed} of its {total} replicas")
    slices = [(p.replicas, f"{_slice(p)} ({resources_text(want)} each)") for p, want in unmatched]
    where = (f"on {slices[0][1]}" if len(slices) == 1
             else "as " + " and ".join(f"{n} on {s}" for n, s in slices))
    return (f"model {model}: {workload} asks for {resources_text(have)} per pod, but the plan "
            f"places {whose} {where}: they stay Pending or run on other GPUs than the plan "
            "counts. Headroom does not change the workload: give its pods the planned slice's "
            f"GPU resource; reason {SLICE_MISMATCH}")


def workload_slice_findings(models: Sequence[ObservedModel], placement: FleetPlacement,
                            mig_strategy: str) -> tuple[str, ...]:
    """One finding per observed model whose workload (as read this tick; models without one
    read, e.g. simulated, are not checked) does not fit where ``placement`` puts it."""
    found = (slice_finding(m.name, m.workload, dict(m.gpu_requests),
                           placement.slices_for(m.name), mig_strategy)
             for m in models if m.workload)
    return tuple(f for f in found if f is not None)
