"""Per-model replica bounds (``min_replicas`` / ``max_replicas``) and paused models in the
sizing core: the hot target stays within the bounds unless a GPU budget or pool binds (the
reason then names both), ``max_replicas`` also caps hot + idle, unset bounds change nothing,
and a paused model is held, never trimmed, while its GPUs still count."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.autoscaling.bounds import bound_tag, bounded_hot, bounded_idle
from controlplane.autoscaling.core import Budgets, FleetModel, Sizing, decide, size
from controlplane.autoscaling.live import placement_demands
from controlplane.autoscaling.policies import ladder_rungs, predictive_policy
from controlplane.autoscaling.sizing import TENANT_BUDGET, ReplicaShape
from controlplane.domain.actions import SetReplicas
from controlplane.domain.demand import replicas_for
from controlplane.domain.desired import PoolSpec
from controlplane.domain.guards import GuardMemory
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.domain.pause import ModelPause, held
from controlplane.sim.catalog import DEMO_MODELS
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
CHAT, SUPPORT = DEMO_MODELS[0], DEMO_MODELS[1]
POOLS = (PoolSpec("a100", "A100-80GB", 1, 0, 40, 5.0),)


def _model(spec: ModelSpec, idle_gpu_fraction: float = 1.0) -> FleetModel:
    shape = ReplicaShape(spec.name, spec.tenant, "A100-80GB", 0.5, 10.0, idle_gpu_fraction)
    return FleetModel(spec, shape, ladder_rungs(2.0, idle_gpu_fraction, 2.0, 10.0, 300.0), 2.0)


def _observed(*models: FleetModel, replicas: int = 3, rps: float = 30.0) -> ObservedState:
    return ObservedState(T0, (), (), tuple(
        ObservedModel(m.spec.name, replicas, 0, replicas, rps, 30.0) for m in models))


def _forecasts(rps: float, *models: FleetModel) -> dict[str, Forecast]:
    """A forecast of ``rps`` (p50), p90 twice that."""
    return {m.spec.name: Forecast(m.spec.name, T0, 600, (rps,) * 2, (2 * rps,) * 2, "test")
            for m in models}


def _size(spec: ModelSpec, rps: float = 30.0, tenant_gpus: float | None = None,
          idle_gpu_fraction: float = 1.0) -> Sizing:
    model = _model(spec, idle_gpu_fraction)
    tenants = () if tenant_gpus is None else ((spec.tenant, tenant_gpus),)
    return size(_observed(model, rps=rps), _forecasts(rps, model), [model],
                predictive_policy(short_minute_cost_ratio=0.0), Budgets(tenants), T0, POOLS)


def _replica_targets(spec: ModelSpec, rps: float = 30.0,
                     tenant_gpus: float | None = None) -> list[tuple[int, str]]:
    model = _model(spec)
    tenants = () if tenant_gpus is None else ((spec.tenant, tenant_gpus),)
    decision = decide(_observed(model, rps=rps), _forecasts(rps, model), [model], POOLS,
                      predictive_policy(short_minute_cost_ratio=0.0), Budgets(tenants),
                      GuardMemory(), T0)
    return [(t.value, t.reason) for t in decision.desired.replicas]


def test_the_hot_target_is_raised_to_min_and_lowered_to_max_and_left_alone_without_bounds(
        ) -> None:
    assert bounded_hot(3, CHAT) == 3
    assert bounded_hot(3, replace(CHAT, min_replicas=5)) == 5
    assert bounded_hot(3, replace(CHAT, max_replicas=2)) == 2
    assert bounded_hot(0, replace(CHAT, min_replicas=2, max_replicas=4)) == 2
    assert bounded_idle(6, 3, replace(CHAT, max_replicas=7)) == 1
    assert bounded_idle(6, 3, CHAT) == 3


def test_a_min_bound_raises_an_idle_models_target_and_its_reason_says_so() -> None:
    demand_reason = _replica_targets(CHAT, rps=0.0)[0][1]
    assert _replica_targets(replace(CHAT, min_replicas=2), rps=0.0) == [
        (2, f"{demand_reason}+min_replicas:2")]


def test_a_max_bound_lowers_the_target_and_its_reason_says_so() -> None:
    (unbounded, reason), = _replica_targets(CHAT, rps=80.0)
    assert unbounded > 4
    assert _replica_targets(replace(CHAT, max_replicas=4), rps=80.0) == [
        (4, f"{reason}+max_replicas:4")]


def test_a_tenant_budget_wins_over_min_replicas_and_the_reason_names_both() -> None:
    # min 6 replicas of half a GPU want 3 GPUs; the tenant has 2
    assert _replica_targets(replace(CHAT, min_replicas=6), rps=0.0, tenant_gpus=2.0) == [
        (4, f"{TENANT_BUDGET}:{CHAT.tenant}+min_replicas:6")]


def test_max_replicas_caps_the_hot_and_idle_replicas_together() -> None:
    unbounded = _size(CHAT, rps=30.0, idle_gpu_fraction=0.05).requests[0]
    assert (unbounded.hot, unbounded.idle) == (6, 3)  # the ladder keeps 3 cheap idle replicas
    bounded = _size(replace(CHAT, max_replicas=7), rps=30.0, idle_gpu_fraction=0.05).requests[0]
    assert (bounded.hot, bounded.idle) == (6, 1)


def test_the_live_loop_asks_placement_for_the_replicas_a_min_bound_raised() -> None:
    spec = replace(CHAT, min_replicas=3)
    sizing = _size(spec, rps=0.0)
    demand, = placement_demands(sizing, [_model(spec)])
    assert replicas_for(demand.rate_rps, 10.0) == 3


def test_a_paused_model_is_held_and_never_trimmed_while_its_gpus_still_count() -> None:
    chat, support = _model(CHAT), _model(SUPPORT)
    pause = ModelPause(CHAT.name, 4, T0, "alice")
    observed = _observed(chat, support)
    decision = decide(observed, _forecasts(60.0, chat, support), [chat, support], POOLS,
                      predictive_policy(short_minute_cost_ratio=0.0),
                      Budgets(cluster_gpus=4), GuardMemory(), T0,
                      held=held((pause,), observed))
    targets = {t.target: (t.value, t.reason) for t in decision.desired.replicas}
    assert targets[CHAT.name] == (4, "paused since 2026-01-05T12:00:00Z by alice")
    # 4 GPUs: the paused model's 4 half-GPU replicas take 2, the other model the 2 left
    assert targets[SUPPORT.name][0] == 4
    assert [a for a in decision.plan.actions
            if isinstance(a, SetReplicas) and a.model == CHAT.name] == [
        SetReplicas(CHAT.name, 3, 4, "paused since 2026-01-05T12:00:00Z by alice")]
    assert [ladder.model for ladder in decision.ladders] == [SUPPORT.name]


def test_a_paused_model_alone_over_its_pools_is_placed_on_all_they_hold_not_left_unplaced(
        ) -> None:
    chat, support = _model(CHAT), _model(SUPPORT)
    observed = _observed(chat, support)
    sizing = size(observed, _forecasts(60.0, chat, support), [chat, support],
                  predictive_policy(short_minute_cost_ratio=0.0), Budgets(), T0, POOLS,
                  held=held((ModelPause(CHAT.name, 100, T0, "alice"),), observed))
    hot = {r.model: r.hot for r in sizing.requests}
    # 40 one-GPU nodes of half-GPU replicas: 80 of the 100 held, none left for the other
    assert hot == {CHAT.name: 80, SUPPORT.name: 0}
    assert sizing.held == ((CHAT.name, 100, "paused since 2026-01-05T12:00:00Z by alice"),)


def test_a_model_paused_without_a_count_is_held_at_its_observed_replicas_with_no_action(
        ) -> None:
    chat = _model(CHAT)
    observed = _observed(chat, replicas=5)
    decision = decide(observed, _forecasts(200.0, chat), [chat], POOLS,
                      predictive_policy(short_minute_cost_ratio=0.0), Budgets(), GuardMemory(),
                      T0, held=held((ModelPause(CHAT.name, None, T0),), observed))
    assert [(t.value, t.reason) for t in decision.desired.replicas] == [
        (5, "paused since 2026-01-05T12:00:00Z")]
    assert not [a for a in decision.plan.actions if isinstance(a, SetReplicas)]


@settings(max_examples=150, deadline=None)
@given(rps=st.floats(0.0, 300.0), low=st.none() | st.integers(0, 12),
       span=st.none() | st.integers(0, 12), tenant_gpus=st.none() | st.integers(0, 12))
def test_the_target_is_within_its_bounds_unless_a_budget_binds_and_unbounded_is_as_before(
        rps: float, low: int | None, span: int | None, tenant_gpus: int | None) -> None:
    high = None if span is None else max(1, (low or 0) + span)
    spec = replace(CHAT, min_replicas=low, max_replicas=high)
    request, = _size(spec, rps, tenant_gpus).requests
    before, = _size(CHAT, rps, tenant_gpus).requests  # the same demand, no bounds
    sizing = _size(spec, rps, tenant_gpus)
    asked = replicas_for(sizing.demands[0].rate_rps, 10.0)
    cut = dict(sizing.budget_cuts)
    if CHAT.name in cut:  # a budget bound: it may go below min, and says so
        assert cut[CHAT.name] == f"{TENANT_BUDGET}:{CHAT.tenant}"
        if low is not None and request.hot < low:
            assert dict(sizing.bounds)[CHAT.name] == f"min_replicas:{low}"
    else:
        assert (low or 0) <= request.hot and (high is None or request.hot <= high)
        raised = max(asked, low or 0)
        assert request.hot == (raised if high is None else min(raised, high))
    assert high is None or request.hot + request.idle <= high
    if low is None and high is None:
        assert request == before and sizing.bounds == ()
    assert bound_tag(asked, asked, asked, CHAT) == ""
