"""SimFleet: nodes bill from the request and serve after provisioning and a pre-pull; replicas
start fast where weights are cached; scale-down drains make-before-break; idle ones wake fast."""

from __future__ import annotations

from datetime import UTC, datetime

from controlplane.autoscaling.distribution import Durations
from controlplane.autoscaling.sizing import ReplicaShape
from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import Isolation
from controlplane.simulation.fleet import SimFleet
from controlplane.simulation.sim_config import ColdStartModel, FleetConfig, SimConfig, SimModel

T0 = datetime(2026, 1, 5, tzinfo=UTC)
POOL = PoolSpec("a100-80gb", "A100-80GB", 4, 0, 10, 5.0)


def _fleet(idle_fraction: float = 1.0, share: float = 1.0) -> SimFleet:
    model = SimModel(ReplicaShape("m", "t", "A100-80GB", share, 10.0, idle_fraction),
                     Isolation.TRUSTED,
                     ColdStartModel(Durations.fixed(3.0), Durations.fixed(30.0), "fixed"))
    fleet = FleetConfig(Durations.fixed(120.0), 4, 10, 2.0, {"A100-80GB": 5.0})
    return SimFleet(SimConfig((model,), fleet, "test"), (POOL,), lambda _m, _t: 50.0, T0, 7)


def test_a_node_bills_from_its_request_and_serves_after_provisioning_and_pre_pull() -> None:
    fleet = _fleet()
    fleet.set_size("a100-80gb", 1)
    fleet.set_replicas("m", 2)
    assert fleet.billed_gpus() == 4
    fleet.advance(119.0)
    assert fleet.snapshot().pool("a100-80gb").nodes_pending == 1  # type: ignore[union-attr]
    fleet.advance(120.0)  # ready; replicas bind but wait for the 30 s pre-pull, then start in 3 s
    assert fleet.ready_replicas("m") == 0
    fleet.advance(152.9)
    assert fleet.ready_replicas("m") == 0
    fleet.advance(153.0)
    assert fleet.ready_replicas("m") == 2
    assert fleet.snapshot().model("m").capacity_rps == 20.0  # type: ignore[union-attr]


def test_replicas_on_a_node_with_cached_weights_start_in_the_cached_time() -> None:
    fleet = _fleet()
    fleet.materialize({"a100-80gb": 1}, {"m": 1})
    fleet.advance(10.0)
    fleet.set_replicas("m", 3)
    fleet.advance(12.9)
    assert fleet.ready_replicas("m") == 1
    fleet.advance(13.0)
    assert fleet.ready_replicas("m") == 3


def test_replicas_wait_for_room_and_half_gpu_replicas_share_a_gpu() -> None:
    fleet = _fleet(share=0.5)
    fleet.materialize({"a100-80gb": 1}, {"m": 8})
    assert fleet.ready_replicas("m") == 8
    fleet.set_replicas("m", 9)
    fleet.advance(100.0)
    assert fleet.ready_replicas("m") == 8
    assert fleet.snapshot().model("m").replicas_pending == 1  # type: ignore[union-attr]


def test_an_empty_node_goes_at_once_and_a_busy_one_drains_make_before_break() -> None:
    fleet = _fleet()
    fleet.materialize({"a100-80gb": 3}, {"m": 6})  # first fit: 4 + 2 + 0
    fleet.set_size("a100-80gb", 2)
    assert fleet.billed_gpus() == 8 and fleet.draining_nodes() == 0  # the empty one went
    fleet.set_size("a100-80gb", 1)  # the node with 2 drains; no room elsewhere yet
    assert fleet.draining_nodes() == 1 and fleet.ready_replicas("m") == 6
    fleet.set_size("a100-80gb", 2)  # a new node: the successors start there
    lowest = 6
    for t_s in range(1, 200):
        fleet.advance(float(t_s))
        lowest = min(lowest, fleet.ready_replicas("m"))
    assert lowest == 6  # never fewer serving while the node moved
    assert fleet.draining_nodes() == 0 and fleet.billed_gpus() == 8


def test_a_drain_waits_while_there_is_no_room_elsewhere() -> None:
    fleet = _fleet()
    fleet.materialize({"a100-80gb": 2}, {"m": 8})
    fleet.set_size("a100-80gb", 1)
    fleet.advance(600.0)
    assert fleet.ready_replicas("m") == 8 and fleet.billed_gpus() == 8
    fleet.set_replicas("m", 4)  # room appears: the drained node's replicas go first
    fleet.advance(601.0)
    assert fleet.ready_replicas("m") == 4 and fleet.billed_gpus() == 4


def test_scaled_down_replicas_stay_loaded_up_to_the_idle_target_and_wake_fast() -> None:
    fleet = _fleet(idle_fraction=0.25)
    fleet.materialize({"a100-80gb": 1}, {"m": 4})
    fleet.set_idle_replicas("m", 2)
    fleet.set_replicas("m", 1)
    assert (fleet.ready_replicas("m"), fleet.idle_replicas("m")) == (1, 2)
    fleet.advance(10.0)
    fleet.set_replicas("m", 3)  # two idle replicas wake in 2 s
    fleet.advance(11.9)
    assert fleet.ready_replicas("m") == 1
    fleet.advance(12.0)
    assert (fleet.ready_replicas("m"), fleet.idle_replicas("m")) == (3, 0)


def test_unknown_targets_and_negative_sizes_fail_without_changes() -> None:
    fleet = _fleet()
    assert not fleet.set_size("h100", 2).ok
    assert not fleet.set_size("a100-80gb", -1).ok
    assert not fleet.set_replicas("other", 1).ok
    assert not fleet.set_idle_replicas("m", -1).ok
    assert fleet.billed_gpus() == 0
