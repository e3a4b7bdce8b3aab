"""The live loop's plan cost: PlanFleet prices its own warm GPUs, which the live loop replaces
with the ladder's, so the plan's $/h must be priced again from exactly the GPUs it counts (its
placed GPUs and the ladder's warm GPUs), as ``headroom status`` and the store show them."""

from __future__ import annotations

from controlplane.adapters.placement import LocalPlacementClient
from controlplane.autoscaling.core import Sizing
from controlplane.autoscaling.live import live_models, placement_demands, with_ladder_warm
from controlplane.autoscaling.sizing import ModelRequest
from controlplane.domain.demand import Demand, replicas_for
from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.domain.placement import FleetPlacement, PlacedSegment, WarmGpus, priced
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


def _planned(cached: int) -> tuple[FleetPlacement, FleetPlacement]:
    """PlanFleet's placement for the demand, and the live loop's (the ladder's warm GPUs)."""
    (model,) = live_models((SPEC,), (A100, L4), 120.0, 30.0)
    hot = replicas_for(DEMAND.rate_rps, model.shape.per_replica_rps)
    sizing = Sizing((DEMAND,), (), (ModelRequest("m", hot, cached=cached),), (model.shape,))
    (asked,) = placement_demands(sizing, (model,))
    placed = LocalPlacementClient(PlacementEngine()).plan_fleet((asked,), (SPEC,), (A100, L4))
    return placed, with_ladder_warm(placed, sizing, {"m": model.shape}, (A100, L4))


def test_the_live_plan_costs_its_gpus_not_the_warm_gpus_planfleet_sized_that_the_ladder_drops(
) -> None:
    placed, live = _planned(cached=0)
    assert placed.warm_pools, "PlanFleet sized warm GPUs of its own (what the bug counted)"
    assert live.warm_pools == () and live.gpus_for("L4") == 3
    assert live.cost_per_hour == _counted_cost(live) == 2.4


def test_the_live_plan_costs_the_ladders_warm_gpus_beside_its_placed_ones() -> None:
    _, live = _planned(cached=2)
    assert [(w.product, w.gpus) for w in live.warm_pools] == [("L4", 2)]
    assert live.cost_per_hour == _counted_cost(live) == 4.0


def test_a_placement_is_priced_per_gpu_it_counts_placed_and_warm_of_each_product() -> None:
    segment = PlacedSegment("m", "A100-80GB/0", "A100-80GB", "mig", "3g.40gb", 0, 3, 10.0)
    placement = FleetPlacement(
        4, (segment,), (("A100-80GB", ("A100-80GB/0", "A100-80GB/1")), ("L4", ("L4/0",))),
        (WarmGpus("L4", 2, "ladder"), WarmGpus("H100-80GB", 1, "ladder")), 99.0, ())
    # H100-80GB has no price here: it costs 0, as PlanFleet prices a product no pool offers
    assert priced(placement, PRICES).cost_per_hour == 12.64
    assert priced(placement, PRICES).gpu_ids_by_product == placement.gpu_ids_by_product
