"""Property tests (hypothesis) of PlanFleet: every plan honours the contract."""

from __future__ import annotations

from dataclasses import replace

from fleet_builders import check_plan
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.domain.fleet import plan_fleet
from scheduler.domain.fleet_types import FleetRequest, GpuPool, ModelDemand, ProfilePoint
from scheduler.domain.model import Isolation
from scheduler.highs import HighsSolver

SOLVER = HighsSolver()
PRODUCTS = ["A100-80GB", "H100-80GB", "L4", "A30"]


@st.composite
def profile_points(draw: st.DrawFn, product: str) -> list[ProfilePoint]:
    sizes = {"L4": [0], "A30": [0, 1, 2, 4]}.get(product, [0, 1, 2, 3, 4, 7])
    return [ProfilePoint(product, draw(st.sampled_from(sizes)), draw(st.sampled_from([1, 8])),
                         draw(st.integers(1, 3)), draw(st.floats(5, 500)),
                         draw(st.floats(1, 120)), draw(st.sampled_from([0, 4000, 30_000])))
            for _ in range(draw(st.integers(1, 4)))]


@st.composite
def fleet_request(draw: st.DrawFn) -> FleetRequest:
    products = draw(st.lists(st.sampled_from(PRODUCTS), min_size=1, max_size=3, unique=True))
    models = []
    for k in range(draw(st.integers(1, 6))):
        pts = [p for prod in products for p in draw(profile_points(prod))]
        models.append(ModelDemand(f"m{k}", "t", draw(st.sampled_from(list(Isolation))),
                                  draw(st.floats(0, 1500)), draw(st.floats(20, 400)),
                                  tuple(pts), draw(st.sampled_from([0.0, 30.0]))))
    pools = tuple(GpuPool(p, draw(st.integers(0, 12)), draw(st.sampled_from([0.0, 1.0, 4.0])))
                  for p in products)
    return FleetRequest(tuple(models), pools)


FAST = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(fleet_request())
def test_every_plan_has_valid_geometry_meets_rates_and_latency(req: FleetRequest) -> None:
    out = plan_fleet(req, 1, solver=SOLVER, time_limit_s=5.0)
    check_plan(out.plan, req)
    used: dict[str, int] = {}
    for gpu in out.plan.gpus:
        used[gpu.product] = used.get(gpu.product, 0) + 1
    for pool in req.pools:
        warm = sum(w.gpus for w in out.plan.warm_pools if w.product == pool.product)
        assert used.get(pool.product, 0) + warm <= pool.max_gpus


@FAST
@given(fleet_request())
def test_the_greedy_fallback_honours_the_same_contract(req: FleetRequest) -> None:
    check_plan(plan_fleet(req, 1, solver=None).plan, req)


@FAST
@given(fleet_request())
def test_same_request_gives_the_same_plan(req: FleetRequest) -> None:
    assert plan_fleet(req, 1, solver=SOLVER) == plan_fleet(req, 1, solver=SOLVER)


@FAST
@given(fleet_request())
def test_replanning_the_same_request_relays_out_nothing(req: FleetRequest) -> None:
    first = plan_fleet(req, 1, solver=SOLVER)
    second = plan_fleet(req, 2, previous=first.plan, solver=SOLVER)
    assert second.relaid_out == 0
    assert len(second.plan.gpus) == len(first.plan.gpus)


@FAST
@given(fleet_request(), st.lists(st.floats(0.5, 1.5), min_size=6, max_size=6))
def test_greedy_replanning_from_a_previous_plan_keeps_the_contract_at_no_extra_cost(
        req: FleetRequest, factors: list[float]) -> None:
    first = plan_fleet(req, 1, solver=None)
    changed = FleetRequest(tuple(replace(m, rate_rps=m.rate_rps * f)
                                 for m, f in zip(req.models, factors, strict=False)), req.pools)
    again = plan_fleet(changed, 2, previous=first.plan, solver=None)
    check_plan(again.plan, changed)
    from_scratch = plan_fleet(changed, 2, solver=None)
    assert len(again.plan.unplaced) <= len(from_scratch.plan.unplaced)
    if len(again.plan.unplaced) == len(from_scratch.plan.unplaced):
        assert again.plan.cost_per_hour <= from_scratch.plan.cost_per_hour + 1e-6
