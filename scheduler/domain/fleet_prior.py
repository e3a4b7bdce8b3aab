"""PlanFleet's prior from the inventory: the layouts the fleet's GPUs hold now, as a plan.

PlanFleet prefers to keep the previous plan's GPU layouts. An engine that has no plan of its own
yet (a restarted process) takes them from its synced inventory instead, so a restart does not
re-lay out (drain) nodes whose layouts serve the demand: every GPU that holds MIG instances
becomes a prior GPU with those instances (profile sizes, starts, and the models they serve when
the inventory knows them), every GPU marked ``whole_in_use`` a prior whole GPU. The prior is a
preference, never a freeze: ``fleet_layout.prior_gpus`` keeps only layouts valid on a requested
pool, and the solver keeps a prior GPU only where that serves the demand at the least cost.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.domain import catalog
from scheduler.domain.catalog import MigProfile
from scheduler.domain.fleet_options import WHOLE
from scheduler.domain.fleet_types import FleetPlan, GpuAssignment, Segment
from scheduler.domain.mig import MigInstance, is_valid_layout, solve_layout
from scheduler.domain.model import GpuSpec, NodeSpec, SharingMode


def prior_from_inventory(nodes: Sequence[NodeSpec]) -> FleetPlan:
    """The inventory's layouts as a plan of revision 0 (GPU ids ``<node>/<index>``); GPUs
    whose layout is not known, or that PlanFleet could not plan as they are (a product without
    MIG in the catalog, a profile that is not its size's standard one, an invalid geometry),
    are left out."""
    gpus: list[GpuAssignment] = []
    for node in sorted(nodes, key=lambda n: n.name):
        if node.unschedulable:  # cordoned (a drain or re-layout under way) or not ready
            continue
        for gpu in sorted(node.gpus, key=lambda g: g.index):
            segments = _segments(gpu)
            if segments:
                gpus.append(GpuAssignment(f"{node.name}/{gpu.index}", gpu.product, segments))
    return FleetPlan(0, tuple(gpus), (), 0.0, ())


def _segments(gpu: GpuSpec) -> tuple[Segment, ...]:
    if gpu.whole_in_use:
        return (Segment("", SharingMode.EXCLUSIVE, "", 0, WHOLE, 0, 0, 0.0, 0.0),)
    if not gpu.mig_instances:
        return ()
    known = catalog.lookup(gpu.product)
    if known is None or not known.mig_capable:
        return ()
    profiles: list[MigProfile] = []
    for held in gpu.mig_instances:
        prof = known.profile(held.profile)
        if prof is None or known.standard_profile(prof.compute_slices) != prof:
            return ()  # PlanFleet plans standard profiles only: it could not keep this GPU
        profiles.append(prof)
    starts = _starts(gpu, profiles)
    if starts is None:
        return ()
    return tuple(Segment(held.model, SharingMode.MIG, prof.name, start, prof.compute_slices,
                         0, 0, 0.0, 0.0)
                 for held, prof, start in zip(gpu.mig_instances, profiles, starts, strict=True))


def _starts(gpu: GpuSpec, profiles: Sequence[MigProfile]) -> list[int] | None:
    """The instances' starts as the inventory gives them, or a valid geometry for their
    profiles when it does not give them all; None when there is no valid one."""
    known = catalog.lookup(gpu.product)
    assert known is not None
    given = [held.start for held in gpu.mig_instances]
    if all(start is not None for start in given):
        starts = [start for start in given if start is not None]
        layout = [MigInstance(p, s) for p, s in zip(profiles, starts, strict=True)]
        return starts if is_valid_layout(known, layout) else None
    return solve_layout(known, profiles)
