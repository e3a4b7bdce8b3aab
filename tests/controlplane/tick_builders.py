"""A complete TickReport for tests that store or export one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.domain.actions import ActionOutcome, ScaleNodePool, SetReplicas, SkippedAction
from controlplane.domain.demand import Demand
from controlplane.domain.guards import GuardMemory, Recommendation
from controlplane.domain.observed import ObservedModel, ObservedPool, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment, WarmGpus
from controlplane.domain.plan import Plan
from controlplane.domain.tick import TickReport, TickStatus

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def sample_tick_report() -> TickReport:
    """One applied tick: pool l4 (4 GPUs per node, 1 ready, 1 pending, target 2) scaled 1 -> 2,
    bert-embed (500 rps seen, 600 capacity) 2 -> 3 replicas, a scale-up held by ``max_step``,
    both actions applied."""
    observed = ObservedState(T0, (ObservedPool("l4", "L4", 4, 1, 1, 2),), (),
                             (ObservedModel("bert-embed", 2, 1, 3, 500.0, 600.0),))
    placement = FleetPlacement(
        revision=7,
        segments=(PlacedSegment("bert-embed", "L4-0", "L4", "exclusive", "", 0, 0, 300.0),),
        gpu_ids_by_product=(("L4", ("L4-0",)),), warm_pools=(WarmGpus("L4", 1, "p90"),),
        cost_per_hour=1.6, unplaced=())
    actions = (ScaleNodePool("l4", 1, 2, "placement"), SetReplicas("bert-embed", 2, 3, "p90"))
    plan = Plan(T0, actions, (SkippedAction("l4", 5, 2, "max_step"),))
    memory = GuardMemory((("pool/l4", (Recommendation(T0, 2),)),))
    return TickReport(T0, T0 + timedelta(seconds=1), TickStatus.APPLIED, "", observed,
                      (Demand("bert-embed", 600.0, 500.0, 480.0, "forecast_p90"),), placement, plan,
                      (ActionOutcome("l4", True, "ok"), ActionOutcome("bert-embed", True, "ok")),
                      memory)
