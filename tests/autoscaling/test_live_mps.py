"""The live reconcile loop's sizing of a model on MPS: a profile point's ``throughput_rps`` is
what its whole segment serves (all its MPS processes, as PlanFleet counts it), and a segment on
a whole GPU runs one replica per MPS process, so the sizing, PlanFleet, the replica targets and
KEDA / Prometheus agree on replicas, GPUs and capacity."""

from __future__ import annotations

from controlplane.adapters.placement import LocalPlacementClient
from controlplane.adapters.prometheus import per_replica_rps
from controlplane.autoscaling.core import Sizing
from controlplane.autoscaling.live import live_models, placement_demands
from controlplane.autoscaling.sizing import ModelRequest
from controlplane.domain.demand import Demand, replicas_for
from controlplane.domain.desired import PoolSpec, desired_state
from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from scheduler.engine import PlacementEngine

POOL = PoolSpec("l4", "L4", 8, 0, 4, 0.8)
# one whole L4 shared by 4 MPS processes, 100 rps together
SPEC = ModelSpec("m", "t", Isolation.TRUSTED, Engine.TRITON, 1000.0,
                 (ProfilePoint("L4", 0, 8, 4, 100.0, 100.0, 4000),), ColdStart(10.0, 20.0))
DEMAND = Demand("m", 300.0, 300.0, 300.0, "forecast_p90")


def test_a_replica_of_a_four_process_mps_segment_is_sized_at_a_quarter_of_its_throughput(
) -> None:
    (model,) = live_models((SPEC,), (POOL,), 120.0, 30.0)
    assert model.shape.per_replica_rps == 25.0
    assert model.shape.gpu_share == 0.25
    assert model.replica_usd_per_h == 0.8 * 0.25
    assert replicas_for(300.0, model.shape.per_replica_rps) == 12


def test_the_live_sizing_asks_for_the_replicas_and_gpus_planfleet_places_for_an_mps_model(
) -> None:
    (model,) = live_models((SPEC,), (POOL,), 120.0, 30.0)
    hot = replicas_for(DEMAND.rate_rps, model.shape.per_replica_rps)
    sizing = Sizing((DEMAND,), (), (ModelRequest("m", hot),), (model.shape,))
    (asked,) = placement_demands(sizing, (model,))
    assert asked.rate_rps == 300.0  # the hot replicas cover the demand: nothing is cut
    placement = LocalPlacementClient(PlacementEngine()).plan_fleet((asked,), (SPEC,), (POOL,))
    assert placement.gpus_for("L4") == 3 == hot * model.shape.gpu_share
    assert placement.capacity_rps_for("m") == 300.0 == hot * model.shape.per_replica_rps
    desired = desired_state(placement, (POOL,), (DEMAND,))
    assert [(t.target, t.value) for t in desired.replicas] == [("m", 12)]


def test_keda_and_prometheus_count_one_mps_process_of_a_segment_per_replica() -> None:
    assert per_replica_rps((SPEC,)) == {"m": 25.0}
