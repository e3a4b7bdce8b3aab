"""The simulated fleet's latency: an M/M/1-like queue per replica whose true capacity is the
profile's throughput x the model's true throughput factor; the latency reaches the SLO exactly
at the true capacity, which is also the capacity the simulator reports (and short minutes use)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.runtime import SimRuntime
from controlplane.settings import ConfigError, SimSettings, load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.cluster import SimCluster
from controlplane.sim.latency import mean_latency_ms, true_capacity_rps
from controlplane.sim.nodes import replica_share
from controlplane.store import Store

T0 = datetime(2026, 1, 5, tzinfo=UTC)
MISTRAL = next(s for s in DEMO_MODELS if s.name == "mistral-7b-support")  # 18 rps, 180/500 ms
POOLS = (PoolSpec("a100", "A100-80GB", 8, 0, 4, 3.4),)


def _ready_latency_ms(factor: float, demand_rps: float, ready: int) -> float:
    """MISTRAL's mean latency with ``ready`` > 0 replicas (only none ready has no latency)."""
    latency_ms = mean_latency_ms(MISTRAL, factor, demand_rps, ready)
    assert latency_ms is not None
    return latency_ms


def test_latency_is_the_profile_latency_unloaded_and_the_slo_at_true_capacity() -> None:
    assert mean_latency_ms(MISTRAL, 1.0, 0.0, 2) == pytest.approx(180.0)
    assert mean_latency_ms(MISTRAL, 1.0, 2 * 18.0, 2) == pytest.approx(500.0)
    assert mean_latency_ms(MISTRAL, 0.8, 2 * 14.4, 2) == pytest.approx(500.0)
    assert _ready_latency_ms(0.8, 2 * 18.0, 2) > 500.0  # the profile's rate is too much


def test_latency_grows_with_load_and_stops_at_twenty_times_unloaded_past_saturation() -> None:
    rates = [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]
    got = [_ready_latency_ms(1.0, r, 1) for r in rates]
    assert got == sorted(got)
    assert mean_latency_ms(MISTRAL, 1.0, 1000.0, 1) == pytest.approx(20 * 180.0)


def test_a_model_with_no_replica_ready_has_no_latency() -> None:
    assert mean_latency_ms(MISTRAL, 1.0, 10.0, 0) is None


def test_the_cluster_reports_true_capacity_and_latency_of_its_ready_replicas() -> None:
    sim = SimSettings(node_provision_s=(0, 0), image_pull_s=(0, 0), weight_load_s=(0, 0),
                      warmup_s=(0, 0), true_throughput_factor={MISTRAL.name: 0.8})
    cluster = SimCluster(POOLS, (MISTRAL,), lambda _m, _at: 28.8, sim, T0)
    cluster.set_size("a100", 1)
    cluster.set_replicas(MISTRAL.name, 2)
    cluster.step(T0 + timedelta(seconds=1))
    cluster.step(T0 + timedelta(seconds=20))  # the second replica starts warm: 8 s
    model = cluster.snapshot().model(MISTRAL.name)
    assert model is not None and model.replicas_ready == 2
    assert model.capacity_rps == pytest.approx(2 * 14.4)
    assert model.latency_ms == pytest.approx(500.0)


def test_a_true_factor_for_a_model_the_simulated_fleet_does_not_run_is_refused() -> None:
    settings = load_settings(sim={"true_throughput_factor": {"mistral-7b-suport": 0.8}})
    with pytest.raises(ConfigError, match=r"sim\.true_throughput_factor: no model "
                                          r"'mistral-7b-suport'"):
        SimRuntime(settings, Store.open("sqlite://", migrate=True), T0)


# a whole L4 shared by 4 MPS processes that serve 100 rps together (the segment's throughput)
MPS_4 = ModelSpec("mps-4", "t", Isolation.TRUSTED, Engine.TRITON, 500.0,
                  (ProfilePoint("L4", 0, 8, 4, 100.0, 100.0, 4000),), ColdStart(0.0, 0.0))


def test_a_replica_of_a_four_process_mps_segment_holds_and_serves_a_quarter_of_it() -> None:
    assert replica_share(MPS_4) == 0.25
    assert true_capacity_rps(MPS_4, 1.0) == 25.0
    # the SLO is reached at a quarter of the segment's throughput per replica
    assert mean_latency_ms(MPS_4, 1.0, 4 * 25.0, 4) == pytest.approx(500.0)


def test_twelve_replicas_of_four_process_mps_segments_fill_three_gpus_and_serve_300_rps() -> None:
    sim = SimSettings(node_provision_s=(0, 0), image_pull_s=(0, 0), weight_load_s=(0, 0),
                      warmup_s=(0, 0))
    cluster = SimCluster((PoolSpec("l4", "L4", 8, 0, 4, 0.8),), (MPS_4,),
                         lambda _m, _at: 300.0, sim, T0)
    cluster.set_size("l4", 1)
    cluster.set_replicas(MPS_4.name, 12)
    cluster.step(T0 + timedelta(seconds=1))
    cluster.step(T0 + timedelta(seconds=20))
    snapshot = cluster.snapshot()
    model = snapshot.model(MPS_4.name)
    assert model is not None and model.replicas_ready == 12
    assert model.capacity_rps == pytest.approx(300.0)
    assert [n.whole_gpus_in_use for n in snapshot.nodes] == [3]
