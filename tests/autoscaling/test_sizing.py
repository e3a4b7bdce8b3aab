"""Sizing from per-replica profiles: replicas pack onto GPUs, warm rungs become warm GPUs, and
tenant and cluster GPU budgets trim warm rungs before serving replicas."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial

from hypothesis import given
from hypothesis import strategies as st

from controlplane.autoscaling.core import Budgets, FleetModel, TickDecision, decide
from controlplane.autoscaling.live import live_models
from controlplane.autoscaling.nodepools import (
    CLUSTER_GPU_BUDGET,
    CLUSTER_GPU_BUDGET_BELOW_FLOOR,
    clamp_nodes_to_budget,
    node_pool_targets,
    replica_footprints,
)
from controlplane.autoscaling.policies import ladder_rungs, predictive_policy
from controlplane.autoscaling.sizing import (
    CLUSTER_BUDGET,
    TENANT_BUDGET,
    ModelRequest,
    ReplicaShape,
    apply_gpu_budgets,
    budget_cuts,
    fleet_placement,
    pack_gpus,
    tenant_budget_holds,
)
from controlplane.domain.actions import SetReplicas
from controlplane.domain.desired import (
    DesiredState,
    DesiredTarget,
    PoolSpec,
    ReplicaFootprint,
    desired_state,
)
from controlplane.domain.guards import GuardLimits, GuardMemory, Recommendation
from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.domain.observed import ObservedModel, ObservedPool, ObservedState
from controlplane.domain.planner import plan
from controlplane.sim.catalog import DEMO_MODELS
from forecaster.types import Forecast

LARGE = ReplicaShape("large", "acme", "A100-80GB", 1.0, 2.0)
HALF = ReplicaShape("half", "acme", "A100-80GB", 0.5, 40.0, idle_gpu_fraction=0.5)
THIRD = ReplicaShape("third", "globex", "A100-80GB", 3 / 7, 20.0)
PAIR = ReplicaShape("pair", "globex", "H100-80GB", 2.0, 9.0)
SHAPES = {s.model: s for s in (LARGE, HALF, THIRD, PAIR)}
T0 = datetime(2026, 1, 5, tzinfo=UTC)


def test_whole_half_and_multi_gpu_replicas_pack_as_expected() -> None:
    assert len(pack_gpus([LARGE], [3])) == 3
    assert len(pack_gpus([HALF], [5])) == 3
    assert len(pack_gpus([THIRD], [5])) == 3  # two 3g slices per GPU, one slice stranded
    assert len(pack_gpus([PAIR], [2])) == 4
    assert len(pack_gpus([HALF, THIRD], [1, 1])) == 1  # partly filled GPUs are shared


@given(counts=st.lists(st.integers(0, 30), min_size=3, max_size=3))
def test_packing_never_overfills_a_gpu_and_places_every_replica(counts: list[int]) -> None:
    shapes = [LARGE, HALF, THIRD]
    gpus = pack_gpus(shapes, counts)
    for members in gpus:
        assert sum(shapes[i].gpu_share for i in members) <= 1 + 1e-9
    for i, count in enumerate(counts):
        assert sum(members.count(i) for members in gpus) == count


def test_placement_counts_hot_replicas_as_segments_and_warm_rungs_as_warm_gpus() -> None:
    requests = (ModelRequest("large", hot=3, cached=2), ModelRequest("half", hot=3, idle=2))
    placement = fleet_placement(requests, SHAPES)
    assert placement.replicas_for("large") == 3 and placement.replicas_for("half") == 3
    assert placement.gpus_for("A100-80GB") == 5  # 3 whole + 2 for three halves
    assert placement.warm_gpus_for("A100-80GB") == 3  # 2 cached + 2 idle x 0.5 x 0.5, rounded up


def test_a_tenant_budget_trims_warm_rungs_first_then_serving_replicas() -> None:
    requests = [ModelRequest("large", hot=4, cached=3), ModelRequest("half", hot=2, idle=2)]
    trimmed = apply_gpu_budgets(requests, SHAPES, {"acme": 6.0}, None)
    by_model = {r.model: r for r in trimmed}
    assert by_model["large"].hot == 4 and by_model["large"].cached < 3
    assert sum(r.gpus(SHAPES[r.model]) for r in trimmed) <= 6.0
    tight = apply_gpu_budgets(requests, SHAPES, {"acme": 2.0}, None)
    assert sum(r.gpus(SHAPES[r.model]) for r in tight) <= 2.0
    assert all(r.reason == "tenant_gpu_budget:acme" for r in tight)


def test_the_cluster_budget_applies_across_tenants() -> None:
    requests = [ModelRequest("large", hot=4), ModelRequest("third", hot=7)]
    trimmed = apply_gpu_budgets(requests, SHAPES, {}, 5.0)
    assert sum(r.gpus(SHAPES[r.model]) for r in trimmed) <= 5.0
    assert {r.reason for r in trimmed} <= {CLUSTER_BUDGET, ""}


def test_node_targets_shrink_to_the_cluster_gpu_budget_but_never_below_min_nodes() -> None:
    pools = (PoolSpec("a100", "A100-80GB", 8, 1, 10, 5.0), PoolSpec("l4", "L4", 4, 2, 10, 0.8))
    desired = DesiredState((DesiredTarget("a100", 5, "r"), DesiredTarget("l4", 4, "r")), ())
    clamped = clamp_nodes_to_budget(desired, pools, 30)
    values = {t.target: t.value for t in clamped.pools}
    assert values["a100"] * 8 + values["l4"] * 4 <= 30
    assert values["l4"] >= 2 and clamped.pools[0].reason == CLUSTER_GPU_BUDGET
    floor = clamp_nodes_to_budget(desired, pools, 0)
    assert {t.target: t.value for t in floor.pools} == {"a100": 1, "l4": 2}


def test_pools_held_at_min_nodes_over_the_cluster_gpu_budget_say_so_in_their_reason() -> None:
    pools = (PoolSpec("a100", "A100-80GB", 8, 0, 10, 5.0), PoolSpec("l4", "L4", 4, 5, 10, 0.8))
    desired = DesiredState((DesiredTarget("a100", 2, "r"), DesiredTarget("l4", 6, "r")), ())
    floor = clamp_nodes_to_budget(desired, pools, 8)
    assert [(t.target, t.value, t.reason) for t in floor.pools] == [
        ("a100", 0, CLUSTER_GPU_BUDGET), ("l4", 5, CLUSTER_GPU_BUDGET_BELOW_FLOOR)]


def test_a_pool_clamped_to_the_budget_holds_no_gpus_past_its_clamped_nodes() -> None:
    # 33 GPUs wanted on 4-GPU nodes (9 nodes), a 32-GPU budget: 8 nodes holding 32 GPUs
    pools = (PoolSpec("l4", "L4", 4, 0, 20, 0.8),)
    desired = DesiredState((DesiredTarget("l4", 9, "r", gpus=33),), (DesiredTarget("m", 33, "r"),),
                           footprints=(ReplicaFootprint("m", "l4"),))
    clamped = clamp_nodes_to_budget(desired, pools, 32)
    assert (clamped.pools[0].value, clamped.pools[0].gpus) == (8, 32)
    # 2 replicas kept over the target hold one node over the budget's 8 (the nodes they sit
    # on), never more than the pool has
    limits = GuardLimits(max_step=100, stabilization_s=0, tolerance=0.1)

    def fleet(nodes: int) -> ObservedState:
        return ObservedState(T0, (ObservedPool("l4", "L4", 4, nodes, 0, nodes),), (),
                             (ObservedModel("m", 35, 0, 35, 1.0, 1.0),))

    made, _ = plan(fleet(10), clamped, GuardMemory(), limits, limits, T0)
    assert "skip l4 wanted 8, kept 9 (replicas_scaling_down)" in made.render()
    made, _ = plan(fleet(8), clamped, GuardMemory(), limits, limits, T0)
    assert made.is_noop and [s.reason for s in made.skipped] == ["within_tolerance"]


def test_under_a_cluster_budget_no_pool_grows_over_its_target_for_kept_replicas() -> None:
    pools = (PoolSpec("l4", "L4", 4, 0, 20, 0.8),)
    placement = fleet_placement([ModelRequest("large", 9)], {"large": replace(LARGE,
                                                                              product="L4")})
    free = node_pool_targets(placement, pools, ())
    assert [(t.value, t.max_value) for t in free.pools] == [(3, 20)]
    budgeted = node_pool_targets(placement, pools, (), cluster_gpu_budget=100)
    assert [(t.value, t.max_value) for t in budgeted.pools] == [(3, 3)]


def test_each_models_replicas_run_in_the_pool_of_its_gpu_product_at_its_gpu_share() -> None:
    pools = (PoolSpec("a100", "A100-80GB", 8, 0, 10, 5.0), PoolSpec("l4", "L4", 4, 0, 10, 0.8))
    assert replica_footprints((LARGE, HALF, THIRD, PAIR), pools) == (
        ReplicaFootprint("large", "a100", 1, 1, "A100-80GB", 1.0),
        ReplicaFootprint("half", "a100", 2, 1, "A100-80GB", 0.5),
        ReplicaFootprint("third", "a100", 2, 1, "A100-80GB", 3 / 7),
        # no pool holds H100s: pair runs on none of them
        ReplicaFootprint("pair", "", 1, 2, "H100-80GB", 2.0))


def test_warm_rungs_of_every_model_go_before_any_serving_replica() -> None:
    requests = [ModelRequest("large", hot=4), ModelRequest("half", hot=0, cached=2)]
    trimmed = {r.model: r for r in apply_gpu_budgets(requests, SHAPES, {"acme": 4.0}, None)}
    assert (trimmed["large"].hot, trimmed["large"].reason) == (4, "")
    assert (trimmed["half"].cached, trimmed["half"].reason) == (0, "tenant_gpu_budget:acme")


def test_an_idle_rung_that_keeps_no_gpu_share_is_not_trimmed_for_a_budget() -> None:
    asleep = ReplicaShape("asleep", "acme", "A100-80GB", 1.0, 5.0, idle_gpu_fraction=0.0)
    trimmed = apply_gpu_budgets([ModelRequest("asleep", hot=3, idle=2)], {"asleep": asleep},
                                {"acme": 2.0}, None)
    assert (trimmed[0].hot, trimmed[0].idle) == (2, 2)


@given(rungs=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4), st.integers(0, 4)),
                      min_size=3, max_size=3),
       budget=st.floats(0, 20))
def test_a_budget_trims_serving_replicas_only_once_no_warm_gpu_share_is_left(
        rungs: list[tuple[int, int, int]], budget: float) -> None:
    requests = [ModelRequest(n, hot, idle, cached) for n, (hot, idle, cached) in zip(
        ("large", "half", "third"), rungs, strict=True)]
    trimmed = apply_gpu_budgets(requests, SHAPES, {}, budget)
    warm_left = sum(r.gpus(SHAPES[r.model]) - r.hot * SHAPES[r.model].gpu_share for r in trimmed)
    hot_cut = any(t.hot < r.hot for t, r in zip(trimmed, requests, strict=True))
    assert not (hot_cut and warm_left > 1e-9)
    assert _placed_gpus(trimmed, SHAPES) <= budget + 1e-9


SIX_TENTHS = ReplicaShape("six-tenths", "acme", "A100-80GB", 0.6, 10.0)
ONE_G = ReplicaShape("one-g", "globex", "A100-80GB", 1 / 7, 3.0, idle_gpu_fraction=0.5)
PACKING = {s.model: s for s in (LARGE, HALF, THIRD, PAIR, SIX_TENTHS, ONE_G)}


def _placed_gpus(requests: Sequence[ModelRequest], shapes: Mapping[str, ReplicaShape]) -> int:
    """GPUs the placement of ``requests`` holds: packed hot replicas plus warm GPUs."""
    placement = fleet_placement(requests, shapes)
    products = {shapes[r.model].product for r in requests}
    return sum(placement.gpus_for(p) + placement.warm_gpus_for(p) for p in products)


def test_a_cluster_budget_of_two_gpus_keeps_two_of_three_replicas_of_six_tenths() -> None:
    trimmed = apply_gpu_budgets([ModelRequest("six-tenths", hot=3)], PACKING, {}, 2.0)
    assert (trimmed[0].hot, trimmed[0].reason) == (2, CLUSTER_BUDGET)
    assert _placed_gpus(trimmed, PACKING) == 2


def test_a_tenant_budget_counts_the_gpus_its_replicas_pack_onto() -> None:
    trimmed = apply_gpu_budgets([ModelRequest("six-tenths", hot=3), ModelRequest("half", hot=2)],
                                PACKING, {"acme": 3.0}, None)
    # 2.8 GPU shares, but each 0.6 replica takes a GPU of its own and the halves share one: 4
    assert [(r.hot, r.reason) for r in trimmed] == [(2, "tenant_gpu_budget:acme"), (2, "")]
    assert _placed_gpus(trimmed, PACKING) == 3


def test_without_budgets_the_requests_are_returned_as_they_are() -> None:
    requests = [ModelRequest("six-tenths", hot=30, cached=4), ModelRequest("one-g", 9, 3)]
    assert apply_gpu_budgets(requests, PACKING, {}, None) == tuple(requests)


@given(rungs=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 4), st.integers(0, 4)),
                      min_size=6, max_size=6),
       tenant_budget=st.one_of(st.none(), st.floats(0, 12)),
       cluster_budget=st.one_of(st.none(), st.integers(0, 24)),
       has=st.lists(st.integers(0, 8), min_size=6, max_size=6),
       disruption_budget=st.integers(0, 3))
def test_a_trimmed_plan_fits_its_budgets_in_placed_gpus_under_the_guards_and_every_cut_says_why(
        rungs: list[tuple[int, int, int]], tenant_budget: float | None,
        cluster_budget: int | None, has: list[int], disruption_budget: int) -> None:
    requests = [ModelRequest(n, hot, idle, cached) for n, (hot, idle, cached) in zip(
        PACKING, rungs, strict=True)]
    tenants = {} if tenant_budget is None else {"acme": tenant_budget}
    trimmed = apply_gpu_budgets(requests, PACKING, tenants, cluster_budget)
    if cluster_budget is not None:
        assert _placed_gpus(trimmed, PACKING) <= cluster_budget
    if tenant_budget is not None:
        acme = [r for r in trimmed if PACKING[r.model].tenant == "acme"]
        assert _placed_gpus(acme, PACKING) <= tenant_budget + 1e-9
    for before, after in zip(requests, trimmed, strict=True):
        assert (after.reason != "") == (after != before)
    # from the replicas each model ``has``, through a disruption budget that keeps some of a
    # scale-down: a tenant's model scales up only while the tenant, kept replicas counted, fits
    observed = ObservedState(T0, (), (), tuple(
        ObservedModel(r.model, n, 0, n, 1.0, 1.0) for r, n in zip(trimmed, has, strict=True)))
    desired = DesiredState((), tuple(DesiredTarget(r.model, r.hot, r.reason) for r in trimmed))
    limits = GuardLimits(max_step=100, stabilization_s=0, disruption_budget=disruption_budget)
    made, _ = plan(observed, desired, GuardMemory(), limits, limits, T0,
                   partial(tenant_budget_holds, trimmed, PACKING, tenants))
    planned = dict(zip(PACKING, has, strict=True)) | {
        a.model: a.to_replicas for a in made.actions if isinstance(a, SetReplicas)}
    acme_planned = [replace(r, hot=planned[r.model]) for r in trimmed
                    if PACKING[r.model].tenant == "acme"]
    if tenant_budget is not None and any(
            planned[r.model] > n for r, n in zip(trimmed, has, strict=True)
            if PACKING[r.model].tenant == "acme"):
        assert _placed_gpus(acme_planned, PACKING) <= tenant_budget + 1e-9
    for r, n in zip(trimmed, has, strict=True):  # a hold never takes a replica a model has
        assert min(n, r.hot) <= planned[r.model] <= max(n, r.hot)


T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
CHAT = DEMO_MODELS[0]


def _decide(gpus_per_node: int, cluster_gpus: int | None, share: float = 0.6,
            forecast_rps: float = 30.0, tenant_gpus: float | None = None,
            memory: GuardMemory | None = None) -> TickDecision:
    """One decision for a model of ``share`` GPU and 10 rps per replica, forecast at
    ``forecast_rps``, on a pool of ``gpus_per_node``-GPU nodes under a cluster GPU budget (and
    its tenant's, ``tenant_gpus``), from the guard ``memory`` of the ticks before."""
    tenants = () if tenant_gpus is None else ((CHAT.tenant, tenant_gpus),)
    shape = ReplicaShape(CHAT.name, CHAT.tenant, "A100-80GB", share, 10.0)
    model = FleetModel(CHAT, shape, ladder_rungs(2.0, 1.0, 2.0, 10.0, 300.0), 2.0)
    observed = ObservedState(T0, (), (), (ObservedModel(CHAT.name, 3, 0, 3, 30.0, 30.0),))
    forecast = Forecast(CHAT.name, T0, 600, (forecast_rps,) * 2, (forecast_rps,) * 2, "test")
    pools = (PoolSpec("a100", "A100-80GB", gpus_per_node, 0, 10, 5.0),)
    return decide(observed, {CHAT.name: forecast}, [model], pools,
                  predictive_policy(short_minute_cost_ratio=0.0), Budgets(tenants, cluster_gpus),
                  memory or GuardMemory(), T0)


def test_a_decision_under_a_two_gpu_budget_keeps_only_the_replicas_its_nodes_hold() -> None:
    decision = _decide(gpus_per_node=1, cluster_gpus=2)  # three replicas of 0.6 wanted
    assert [(r.hot, r.reason) for r in decision.requests] == [(2, CLUSTER_BUDGET)]
    assert [t.value for t in decision.desired.pools] == [2]
    assert [t.value for t in decision.desired.replicas] == [2]


def test_a_budget_that_is_not_whole_nodes_keeps_only_the_replicas_its_whole_nodes_hold() -> None:
    decision = _decide(gpus_per_node=2, cluster_gpus=3)  # 3 GPUs placed would need 2 nodes
    assert [(r.hot, r.reason) for r in decision.requests] == [(2, CLUSTER_BUDGET)]
    assert [t.value for t in decision.desired.pools] == [1]
    assert [t.value for t in decision.desired.replicas] == [2]
    assert decision.placement.gpus_for("A100-80GB") <= 2


def test_a_model_the_cluster_budget_trims_says_so_in_its_replica_target_and_action() -> None:
    trimmed_for_a_minute = GuardMemory(((f"model/{CHAT.name}", (
        Recommendation(T0 - timedelta(seconds=60), 2),)),))  # the replica window held
    decision = _decide(gpus_per_node=1, cluster_gpus=2,  # its demand asks for three replicas
                       memory=trimmed_for_a_minute)
    assert [(t.value, t.reason) for t in decision.desired.replicas] == [(2, CLUSTER_BUDGET)]
    assert [(a.to_replicas, a.reason) for a in decision.plan.actions
            if isinstance(a, SetReplicas)] == [(2, CLUSTER_BUDGET)]


def test_a_model_its_tenants_budget_trims_names_the_tenant_in_its_replica_target() -> None:
    decision = _decide(gpus_per_node=1, cluster_gpus=None, tenant_gpus=2.0)
    assert [(t.value, t.reason) for t in decision.desired.replicas] == [
        (2, f"{TENANT_BUDGET}:{CHAT.tenant}")]


def test_a_model_no_budget_trims_keeps_its_demands_reason() -> None:
    decision = _decide(gpus_per_node=1, cluster_gpus=3)  # three replicas fit three GPUs
    assert [(t.value, t.reason) for t in decision.desired.replicas] == [
        (3, decision.demands[0].reason)]
    assert decision.demands[0].reason != CLUSTER_BUDGET


def test_only_a_cut_of_serving_replicas_is_a_budget_cut_of_the_replica_target() -> None:
    requests = [ModelRequest("large", hot=4, cached=3), ModelRequest("half", hot=2, idle=2)]
    warm_only = apply_gpu_budgets(requests, SHAPES, {"acme": 6.0}, None)
    assert warm_only[0].reason and warm_only[0].hot == 4  # its cached rung went
    assert budget_cuts(requests, warm_only) == ()
    tight = apply_gpu_budgets(requests, SHAPES, {"acme": 2.0}, None)
    assert budget_cuts(requests, tight) == tuple(
        (r.model, "tenant_gpu_budget:acme") for r, t in zip(requests, tight, strict=True)
        if t.hot < r.hot)
    assert budget_cuts(requests, tight)  # some serving replica went


@given(hots=st.lists(st.integers(0, 8), min_size=6, max_size=6),
       per_node=st.tuples(st.integers(1, 8), st.integers(1, 8)),
       min_nodes=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       cluster_budget=st.integers(0, 40))
def test_no_node_the_budget_takes_away_holds_a_replica_the_budget_let_through(
        hots: list[int], per_node: tuple[int, int], min_nodes: tuple[int, int],
        cluster_budget: int) -> None:
    pools = (PoolSpec("a100", "A100-80GB", per_node[0], min_nodes[0], 100, 5.0),
             PoolSpec("h100", "H100-80GB", per_node[1], min_nodes[1], 100, 9.0))
    requests = [ModelRequest(n, hot) for n, hot in zip(PACKING, hots, strict=True)]
    trimmed = apply_gpu_budgets(requests, PACKING, {}, cluster_budget, pools)
    desired = desired_state(fleet_placement(trimmed, PACKING), pools, ())
    clamped = clamp_nodes_to_budget(desired, pools, cluster_budget)
    assert [t.value for t in clamped.pools] == [t.value for t in desired.pools]
    for before, after in zip(requests, trimmed, strict=True):
        assert (after.reason != "") == (after != before)


def test_the_live_loop_sizes_a_strict_model_by_its_points_without_mps() -> None:
    # a whole A100 serves 60 rps alone or 240 rps under 8 MPS processes together (each process
    # a replica on 1/8 of the GPU serving 30 rps)
    profile = (ProfilePoint("A100-80GB", 0, 8, 1, 60.0, 20.0, 0),
               ProfilePoint("A100-80GB", 0, 8, 8, 240.0, 40.0, 0))
    specs = [ModelSpec(f"m-{iso.value}", "t", iso, Engine.VLLM, 100.0, profile,
                       ColdStart(5.0, 10.0)) for iso in Isolation]
    pools = (PoolSpec("a100", "A100-80GB", 8, 0, 10, 4.0),)
    models = {m.spec.isolation: m for m in live_models(specs, pools, 120.0, 10.0)}
    strict = models[Isolation.STRICT]
    assert (strict.shape.per_replica_rps, strict.shape.gpu_share, strict.replica_usd_per_h) == (
        60.0, 1.0, 4.0)
    for isolation in (Isolation.TRUSTED, Isolation.NONE):
        assert (models[isolation].shape.per_replica_rps, models[isolation].shape.gpu_share) == (
            30.0, 0.125)
