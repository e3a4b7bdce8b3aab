"""The greedy fallback of PlanFleet stays close to the previous plan, as the solver does."""

from __future__ import annotations

import random
from dataclasses import replace

from fleet_builders import check_plan, points, request

from scheduler.domain.fleet import plan_fleet
from scheduler.domain.fleet_types import FleetPlan, FleetRequest, ModelDemand
from scheduler.domain.model import Isolation

#: Models profiled on different MIG sizes, so that the plan mixes layouts.
SIZES = [(1,), (2,), (3,), (4,), (1, 2), (2, 3), (3, 4), (7,)]


def mixed_models(seed: int, count: int = 40) -> list[ModelDemand]:
    rng = random.Random(seed)
    return [ModelDemand(f"m{i:02d}", "t", Isolation.TRUSTED, rng.uniform(5, 300), 100.0,
                        points("A100-80GB", rng.uniform(5, 30), sizes=rng.choice(SIZES)), 0.0)
            for i in range(count)]


def jittered(models: list[ModelDemand], seed: int) -> FleetRequest:
    rng = random.Random(seed)
    return request(*(replace(m, rate_rps=m.rate_rps * rng.uniform(0.9, 1.1)) for m in models))


def instances(plan: FleetPlan) -> dict[str, set[tuple[int, int]]]:
    return {g.gpu_id: {(s.compute_slices, s.mig_start) for s in g.segments} for g in plan.gpus}


def changed_layouts(before: FleetPlan, after: FleetPlan) -> int:
    """GPUs of both plans that use an instance the previous layout did not have (a GPU
    kept with its layout may leave an instance empty)."""
    old, new = instances(before), instances(after)
    return sum(1 for gpu_id in old.keys() & new.keys() if not new[gpu_id] <= old[gpu_id])


def segments(plan: FleetPlan) -> dict[str, set[tuple[str, int, int]]]:
    return {g.gpu_id: {(s.model, s.compute_slices, s.mig_start) for s in g.segments}
            for g in plan.gpus}


def test_replanning_the_same_request_greedily_relays_out_nothing_and_says_so() -> None:
    req = request(*mixed_models(1))
    first = plan_fleet(req, 1, solver=None)
    second = plan_fleet(req, 2, previous=first.plan, solver=None)
    assert second.solver_used == "greedy"
    assert second.relaid_out == 0 and second.moved == 0
    assert segments(second.plan) == segments(first.plan)
    assert second.plan.cost_per_hour == first.plan.cost_per_hour


def test_a_small_change_in_demand_keeps_most_greedy_layouts_at_no_extra_cost() -> None:
    models = mixed_models(1)
    previous = plan_fleet(request(*models), 1, solver=None).plan
    relaid = []
    for tick in range(5):
        req = jittered(models, 100 + tick)
        out = plan_fleet(req, 2 + tick, previous=previous, solver=None)
        check_plan(out.plan, req)
        from_scratch = plan_fleet(req, 2 + tick, solver=None)
        assert out.plan.cost_per_hour <= from_scratch.plan.cost_per_hour
        assert out.plan.unplaced == from_scratch.plan.unplaced == ()
        assert changed_layouts(previous, out.plan) <= out.relaid_out
        relaid.append(out.relaid_out)
        previous = out.plan
    # packing each tick from scratch re-laid out 12-43 of the ~63 GPUs per tick
    assert sum(relaid) <= 20, relaid


def test_a_previous_gpu_with_the_same_layout_keeps_its_mig_starts_and_models() -> None:
    models = mixed_models(2, count=12)
    first = plan_fleet(request(*models), 1, solver=None)
    # the same models at the same rates, named in another order: the packing is the same
    second = plan_fleet(request(*reversed(models)), 2, previous=first.plan, solver=None)
    assert second.relaid_out == 0
    assert segments(second.plan) == segments(first.plan)


def test_the_greedy_fallback_keeps_no_more_previous_gpus_than_the_pool_now_allows() -> None:
    models = mixed_models(3, count=10)
    first = plan_fleet(request(*models), 1, solver=None)
    smaller = len(first.plan.gpus) - 1
    pools = tuple(replace(p, max_gpus=smaller) for p in request().pools)
    req = request(*models, pools=pools)
    out = plan_fleet(req, 2, previous=first.plan, solver=None)
    check_plan(out.plan, req)
    assert len(out.plan.gpus) <= smaller
