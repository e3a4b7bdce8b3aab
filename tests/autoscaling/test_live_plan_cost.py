"""The live loop's plan cost: PlanFleet keeps the ladder's warm GPUs (sent with its request)
instead of sizing its own, so the plan it prices, stores and serves counts exactly the GPUs the
loop records (its placed GPUs and the ladder's warm GPUs), as ``headroom status`` and the store
show them."""

from __future__ import annotations

from controlplane.adapters.placement import LocalPlacementClient, placement_from
from controlplane.autoscaling.core import Sizing
from controlplane.autoscaling.live import ladder_warm, live_models, placement_demands
from controlplane.autoscaling.sizing import WARM_POOL_LADDER, ModelRequest
from controlplane.domain.demand import Demand, replicas_for
from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.domain.placement import FleetPlacement
from scheduler.engine import PlacementEngine

A100 = PoolSpec("a100", "A100-80GB", 8, 0, 4, 5.12)
L4 = PoolSpec("l4", "L4", 4, 0, 4, 0.8)
PRICES = {p.product: p.price_per_gpu_hour for p in (A100, L4)}
# a whole L4 per replica, 100 rps; a slow cold start so PlanFleet sizes warm GPUs of its own
SPEC = ModelSpec("m", "t", Isolation.TRUSTED, Engine.TRITON, 1000.0,
                 (ProfilePoint("L4", 0, 8, 1, 100.0, 100.0, 4000),), ColdStart(600.0, 900.0))
DEMAND = Demand("m", 300.0, 300.0, 300.0, "forecast_p90")


def _counted_cost(placement: FleetPlacement) -> float:
    placed = sum(PRICES[p] * len(ids) for p, ids in placement.gpu_ids_by_product)
    return round(placed + sum(PRICES[w.product] * w.gpus for w in placement.warm_pools), 6)


def _planned(cached: int) -> tuple[FleetPlacement, FleetPlacement, PlacementEngine]:
    """PlanFleet's placement of the demand with its own warm GPUs, the live loop's (the
    ladder's warm GPUs sent with the request), and the engine that stored the latter."""
    (model,) = live_models((SPEC,), (A100, L4), 120.0, 30.0)
    hot = replicas_for(DEMAND.rate_rps, model.shape.per_replica_rps)
    sizing = Sizing((DEMAND,), (), (ModelRequest("m", hot, cached=cached),), (model.shape,))
    (asked,) = placement_demands(sizing, (model,))
    engine = PlacementEngine()
    client = LocalPlacementClient(engine)
    own = client.plan_fleet((asked,), (SPEC,), (A100, L4))
    live = client.plan_fleet((asked,), (SPEC,), (A100, L4), ladder_warm(sizing, (model,)))
    return own, live, engine


def test_the_live_plan_keeps_no_warm_gpus_when_the_ladder_warms_none_and_costs_its_gpus(
) -> None:
    own, live, engine = _planned(cached=0)
    assert own.warm_pools, "PlanFleet sized warm GPUs of its own (what it served before)"
    assert live.warm_pools == () and live.gpus_for("L4") == 3
    assert live.cost_per_hour == _counted_cost(live) == 2.4
    assert placement_from(engine.get_plan()) == live  # what GetPlan serves is what is recorded


def test_the_live_plan_keeps_and_costs_the_ladders_warm_gpus_beside_its_placed_ones() -> None:
    _, live, engine = _planned(cached=2)
    assert [(w.product, w.gpus, w.reason) for w in live.warm_pools] == [
        ("L4", 2, WARM_POOL_LADDER)]
    assert live.cost_per_hour == _counted_cost(live) == 4.0
    assert placement_from(engine.get_plan()) == live
