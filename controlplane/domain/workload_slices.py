"""Whether each model's own workloads ask for the GPU resource of the slices the plan places its
replicas on (pure functions of values). A pod asking for another one (``nvidia.com/gpu`` where
the plan has a MIG ``1g.10gb`` instance, a MIG instance or a renamed ``.shared`` resource where it
has a whole GPU) stays Pending or runs on other GPUs than the plan counts, and nothing else says
why. Headroom only reports it, every tick until it is fixed: the workloads are the user's.

One workload serves every replica, so it must fit every planned slice. Of several (say one
Deployment per slice), which replicas each serves is the user's: each must fit one of the
planned slices, and each planned slice must be asked for by one of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controlplane.domain.observed import ObservedModel, ServingWorkload
from controlplane.domain.placement import FleetPlacement, PlannedSlice
from controlplane.domain.relayout_drain import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from controlplane.domain.sharing_config import shared_resource
from controlplane.domain.wording import counted

SLICE_MISMATCH = "workload_slice_mismatch"


def planned_request(planned: PlannedSlice, mig_strategy: str) -> dict[str, int] | None:
    """The GPU resource one replica on ``planned`` asks for, as the device plugin advertises
    the slice under Headroom's configs (REFERENCE.md §1.6, §2.1): a MIG instance as
    ``nvidia.com/mig-<profile>`` (``mixed`` strategy) or ``nvidia.com/gpu`` (``single``); a
    whole GPU as ``nvidia.com/gpu``, a replica of N whole GPUs (tensor parallel) as N of them
    in one pod (the scheduler then puts them on one node, as the plan does); an MPS or
    time-slicing share as the resource Headroom's sharing configs advertise. None when the
    slice names no layout (the simulator's sizing)."""
    if planned.mig_profile:
        single = mig_strategy == "single"
        return {GPU_RESOURCE if single else MIG_RESOURCE_PREFIX + planned.mig_profile: 1}
    if planned.mode == "exclusive":
        return {GPU_RESOURCE: planned.gpus}
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
    if planned.gpus > 1:
        return f"{planned.gpus} whole {planned.product} GPUs of one node per replica"
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
    return (f"model {model}: {workload} asks for {resources_text(have)} per pod, but the plan "
            f"places {_placed(expected, unmatched)}: they stay Pending or run on other GPUs "
            "than the plan counts. Headroom does not change the workload: give its pods the "
            f"planned slice's GPU resource; reason {SLICE_MISMATCH}")


def _placed(expected: Sequence[tuple[PlannedSlice, dict[str, int]]],
            named: Sequence[tuple[PlannedSlice, dict[str, int]]]) -> str:
    """``its 3 replicas on ...`` or ``1 of its 3 replicas as 1 on ... and ...``: the replicas
    of the ``named`` slices of the ``expected`` ones, and where."""
    total = sum(p.replicas for p, _ in expected)
    missed = sum(p.replicas for p, _ in named)
    whose = (f"its {counted(missed, 'replica')}" if missed == total
             else f"{missed} of its {total} replicas")
    slices = [(p.replicas, f"{_slice(p)} ({resources_text(want)} each)") for p, want in named]
    where = (f"on {slices[0][1]}" if len(slices) == 1
             else "as " + " and ".join(f"{n} on {s}" for n, s in slices))
    return f"{whose} {where}"


def model_slice_findings(model: str, workloads: Sequence[ServingWorkload],
                         planned: Sequence[PlannedSlice], mig_strategy: str) -> tuple[str, ...]:
    """What of ``model``'s workloads does not fit the slices the plan places its replicas on:
    one workload as ``slice_finding`` says; of several, each whose pods' GPU resources are no
    planned slice's (named), then the planned slices none of them asks for."""
    if len(workloads) == 1:
        (one,) = workloads
        found = slice_finding(model, one.name, dict(one.gpu_requests), planned, mig_strategy)
        return () if found is None else (found,)
    expected = [(p, want) for p in planned
                if (want := planned_request(p, mig_strategy)) is not None]
    if not workloads or not expected:
        return ()
    wanted = [want for _, want in expected]
    findings = [
        f"model {model}: {w.name} asks for {resources_text(dict(w.gpu_requests))} per pod, but "
        f"the plan places none of the model's replicas on that slice: it places "
        f"{_placed(expected, expected)}, so its pods stay Pending or run on other GPUs than the "
        "plan counts. Headroom does not change the workload: give its pods a planned slice's "
        f"GPU resource; reason {SLICE_MISMATCH}"
        for w in workloads if dict(w.gpu_requests) not in wanted]
    asked = [dict(w.gpu_requests) for w in workloads]
    unasked = [(p, want) for p, want in expected if want not in asked]
    if unasked and len(unasked) < len(expected):  # none asked: each workload is named above
        names = ", ".join(w.name for w in workloads)
        findings.append(
            f"model {model}: the plan places {_placed(expected, unasked)}, but none of its "
            f"workloads ({names}) asks for that: those replicas stay Pending or run on other "
            "GPUs than the plan counts. Headroom does not change the workloads: give one's pods "
            f"the planned slice's GPU resource; reason {SLICE_MISMATCH}")
    return tuple(findings)


def workload_slice_findings(models: Sequence[ObservedModel], placement: FleetPlacement,
                            mig_strategy: str) -> tuple[str, ...]:
    """The findings of every observed model whose workloads (as read this tick; models without
    one read, e.g. simulated, are not checked) do not fit where ``placement`` puts it."""
    return tuple(finding for m in models for finding in model_slice_findings(
        m.name, m.workloads, placement.slices_for(m.name), mig_strategy))
