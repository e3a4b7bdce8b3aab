"""A tenant's GPU budget holds under the replica guards: the replicas a guard keeps (a
scale-down the disruption budget holds back) take GPUs, so another model of the tenant scales up
only into the room they leave, the hold is a skipped change naming the budget, and the change
counted is the one made."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from controlplane.autoscaling.core import Budgets, FleetModel, TickDecision, decide
from controlplane.autoscaling.policies import ladder_rungs, reactive_policy
from controlplane.autoscaling.sizing import ReplicaShape
from controlplane.domain.actions import SetReplicas, SkippedAction
from controlplane.domain.desired import PoolSpec
from controlplane.domain.guards import DISRUPTION_BUDGET, Change, GuardLimits, GuardMemory
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.sim.catalog import DEMO_MODELS
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
LARGE = replace(DEMO_MODELS[0], name="large", tenant="acme")
SMALL = replace(DEMO_MODELS[1], name="small", tenant="acme")
POOLS = (PoolSpec("a100", "A100-80GB", 8, 0, 10, 5.0),)


def _decide(tenant_gpus: float | None) -> TickDecision:
    """large (a whole GPU a replica) falls from 8 replicas to 4, small (half a GPU) rises from
    2 to 12: 10 GPUs once both are there, but the disruption budget removes one large replica
    per window."""
    models = [FleetModel(spec, ReplicaShape(spec.name, spec.tenant, "A100-80GB", share, 10.0),
                         ladder_rungs(2.0, 1.0, 2.0, 10.0, 300.0), 2.0)
              for spec, share in ((LARGE, 1.0), (SMALL, 0.5))]
    observed = ObservedState(T0, (), (), (ObservedModel("large", 8, 0, 8, 40.0, 80.0),
                                          ObservedModel("small", 2, 0, 2, 120.0, 20.0)))
    forecasts = {name: Forecast(name, T0, 600, (rps,) * 2, (rps,) * 2, "test")
                 for name, rps in (("large", 40.0), ("small", 120.0))}
    policy = reactive_policy(target_utilization=1.0, tolerance=0.0)
    policy = replace(policy, replica_limits=GuardLimits(100, 0.0, disruption_budget=1))
    tenants = () if tenant_gpus is None else (("acme", tenant_gpus),)
    return decide(observed, forecasts, models, POOLS, policy, Budgets(tenants), GuardMemory(),
                  T0)


def _replicas(decision: TickDecision) -> dict[str, int]:
    return {a.model: a.to_replicas for a in decision.plan.actions if isinstance(a, SetReplicas)}


def test_a_scale_up_takes_only_the_room_the_replicas_a_guard_keeps_leave_in_the_tenant_budget(
        ) -> None:
    free = _decide(tenant_gpus=None)
    assert _replicas(free) == {"large": 7, "small": 12}  # the guards alone: 13 GPUs
    budgeted = _decide(tenant_gpus=10.0)
    assert [(t.target, t.value) for t in budgeted.desired.replicas] == [("large", 4),
                                                                       ("small", 12)]
    # large keeps 7 GPUs (one removed this tick): small grows only into the 3 left
    assert _replicas(budgeted) == {"large": 7, "small": 6}
    assert budgeted.plan.skipped == (SkippedAction("large", 4, 7, DISRUPTION_BUDGET),
                                     SkippedAction("small", 12, 6, "tenant_gpu_budget:acme"))
    # the change counted (cooldowns, disruption budgets) is the one made: +4, not +10
    assert budgeted.memory.changes_for("model/small") == (Change(T0, 4),)


def test_a_tenant_over_its_budget_with_the_replicas_kept_scales_none_of_its_models_up() -> None:
    decision = _decide(tenant_gpus=8.0)  # large alone keeps 7 GPUs, small has 1: 8
    assert _replicas(decision) == {"large": 7}
    assert SkippedAction("small", decision.desired.replicas[1].value, 2,
                         "tenant_gpu_budget:acme") in decision.plan.skipped
    assert decision.memory.changes_for("model/small") == ()
