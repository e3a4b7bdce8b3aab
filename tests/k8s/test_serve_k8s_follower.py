"""A follower's tick against the API test server: it refreshes the placement inventory, an API
error (unreachable, forbidden) is one logged line, never an exception out of the tick, and a
replica that lost the Lease exports none of the per-model and per-pool gauges it had as leader
(Prometheus scrapes every replica: the alerts on them would fire on its frozen values)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from apiserver import ApiServer
from k8s_builders import gpu_node, k8s_settings, model_deployment
from k8s_harness import FixedLoads, make_backend
from prometheus_client import CollectorRegistry
from relayout_scenario import seed

from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.adapters.placement import LocalPlacementClient
from controlplane.decision_retry import RetryingDecisionStore
from controlplane.domain.lease import LeaseTiming
from controlplane.domain.observed import ModelLoad, ObservedState
from controlplane.metrics import ControlPlaneMetrics
from controlplane.placement_api import journaled_engine
from controlplane.reconcile import ReconcileConfig, ReconcileDeps
from controlplane.reconcile_config import reconcile_config
from controlplane.serve_k8s import follow, follower_tick, leader_tick
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.ledger import SqlForecastLedger
from controlplane.store.relayout import SqlRelayoutStore
from tests.restart_scenario import CHAT


class RecordingPlacement:
    def __init__(self) -> None:
        self.synced: list[ObservedState] = []

    def sync_inventory(self, observed: ObservedState) -> None:
        self.synced.append(observed)


def test_a_follower_tick_syncs_the_placement_inventory(apiserver: ApiServer,
                                                       clock: VirtualClock) -> None:
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    placement = RecordingPlacement()
    assert follow(make_backend(apiserver, clock).reader, placement)  # type: ignore[arg-type]
    assert [n.name for n in placement.synced[0].nodes] == ["l4-1"]


@pytest.mark.parametrize(("code", "level"), [(503, "WARNING"), (403, "ERROR")])
def test_a_follower_that_cannot_read_the_fleet_logs_one_line_and_keeps_its_inventory(
        apiserver: ApiServer, clock: VirtualClock, caplog: pytest.LogCaptureFixture,
        code: int, level: str) -> None:
    reader = make_backend(apiserver, clock).reader
    placement = RecordingPlacement()
    apiserver.inject_fault("GET", "/api/v1/nodes", code, times=5)
    with caplog.at_level(logging.INFO, logger="headroom.serve"):
        assert not follow(reader, placement)  # type: ignore[arg-type]
    assert placement.synced == []
    records = [r for r in caplog.records if r.name == "headroom.serve"]
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in records] == [
        (level, "tick.follower_unobserved", None)]
    assert records[0].__dict__["error"].startswith(f"HTTP {code}: ")


Replica = tuple[K8sBackend, ReconcileDeps, LocalPlacementClient, CollectorRegistry,
                ControlPlaneMetrics]


def _replica(server: ApiServer, clock: VirtualClock, store: Store, identity: str,
             rps: float) -> Replica:
    backend = make_backend(server, clock, identity=identity,
                           relayouts=SqlRelayoutStore(store.engine),
                           load=FixedLoads({CHAT.name: ModelLoad(rps, rps)}))
    placement = LocalPlacementClient(journaled_engine(store, clock))
    deps = ReconcileDeps(clock=clock, reader=backend.reader, node_pools=backend.node_pools,
                         replicas=backend.replicas, placement=placement, forecasts=store,
                         decisions=RetryingDecisionStore(store, identity, backend.elector.term),
                         history=store, ledger=SqlForecastLedger(store.engine),
                         sharing=backend.sharing, mig=backend.mig)
    registry = CollectorRegistry()
    return backend, deps, placement, registry, ControlPlaneMetrics(registry)


def _tick(replica: Replica, clock: VirtualClock, config: ReconcileConfig) -> None:
    """``run_serve_k8s``'s tick, without its locks."""
    backend, deps, placement, _, metrics = replica
    if backend.elector.is_leader(clock.now()):
        leader_tick(deps, config, backend.mig, metrics)
    else:
        follower_tick(backend.reader.without_load(), placement, metrics)


def _fleet_samples(registry: CollectorRegistry) -> list[str]:
    return [sample.name for family in registry.collect() for sample in family.samples
            if sample.name in FLEET_GAUGES]


FLEET_GAUGES = ("headroom_model_rps", "headroom_pool_nodes")


def test_a_replica_that_lost_the_lease_exports_no_fleet_gauges_and_says_it_follows(
        apiserver: ApiServer, clock: VirtualClock, tmp_path: Path) -> None:
    seed(apiserver)
    apiserver.seed(model_deployment(CHAT.name, replicas=2, ready=2))
    store = Store.open(f"sqlite:///{tmp_path / 'headroom.db'}", migrate=True)
    store.upsert_models((CHAT,))
    config = reconcile_config(k8s_settings(), (CHAT,))
    first, second = (_replica(apiserver, clock, store, "headroom-0", 10.0),
                     _replica(apiserver, clock, store, "headroom-1", 55.0))
    assert first[0].elector.try_acquire_or_renew(clock.now(), clock.monotonic())
    _tick(first, clock, config)
    observed = {"model": CHAT.name, "kind": "observed"}
    assert first[3].get_sample_value("headroom_model_rps", observed) == 10.0
    assert first[3].get_sample_value("headroom_leader") == 1.0
    # the first stalls; the second sees the Lease unrenewed for its duration and takes over
    second[0].elector.try_acquire_or_renew(clock.now(), clock.monotonic())
    clock.advance(LeaseTiming().lease_duration_s + 1)
    assert second[0].elector.try_acquire_or_renew(clock.now(), clock.monotonic())
    clock.advance(30)  # the next tick: both try the Lease first, as their leader job does
    assert second[0].elector.try_acquire_or_renew(clock.now(), clock.monotonic())
    assert not first[0].elector.try_acquire_or_renew(clock.now(), clock.monotonic())
    _tick(first, clock, config)
    _tick(second, clock, config)
    assert _fleet_samples(first[3]) == []
    assert first[3].get_sample_value("headroom_leader") == 0.0
    assert first[3].get_sample_value("headroom_reconcile_ticks_total",
                                      {"status": "applied"}) == 1.0  # counters stay
    assert second[3].get_sample_value("headroom_model_rps", observed) == 55.0
    assert set(_fleet_samples(second[3])) == set(FLEET_GAUGES)
    assert second[3].get_sample_value("headroom_leader") == 1.0
