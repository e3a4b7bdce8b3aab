"""A restarted control plane keeps the fleet's layouts: a new placement engine (no plan of its
own) takes its prior from the observed fleet, so the loop's first ticks re-lay out no node whose
layout serves the demand, and still re-lay out one whose layout does not. Real core, in-process
placement, the simulated fleet, SQLite."""

from __future__ import annotations

from datetime import UTC, datetime

from controlplane.adapters.placement import LocalPlacementClient
from controlplane.domain.actions import RelayoutMig
from controlplane.domain.mig_layout import uniform
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.reconcile import ReconcileDeps, reconcile_once
from controlplane.reconcile_config import reconcile_config
from controlplane.settings import SimSettings, load_settings, pool_specs
from controlplane.sim.clock import VirtualClock
from controlplane.sim.cluster import SimCluster
from controlplane.store import Store
from controlplane.store.ledger import SqlForecastLedger
from scheduler.engine import PlacementEngine
from tests.restart_scenario import A100, CHAT, RATE_RPS, relayouts_asked

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SIM = SimSettings(node_provision_s=(60, 60), image_pull_s=(30, 30), weight_load_s=(10, 10),
                  warmup_s=(10, 10), warm_node_start_s=8, mig_relayout_s=(90, 90))


def _restarted_loop(url: str, held: tuple[str, ...]) -> list[TickReport]:
    """Six ticks (3 min) of a control plane started on a fleet whose one A100 node holds
    ``held`` on its GPU and runs the model's replicas (it served them before the restart)."""
    settings = load_settings(db={"url": url}, pools=[{
        "name": "a100", "product": A100, "gpus_per_node": 1, "min_nodes": 1, "max_nodes": 4,
        "price_per_gpu_hour": 5.0}])
    cluster = SimCluster(pool_specs(settings), (CHAT,), lambda _m, _at: RATE_RPS, SIM, T0)
    cluster.lay_out_now("a100-0001", uniform(A100, held))
    cluster.set_replicas(CHAT.name, 2)
    cluster.adopt()
    store = Store.open(url, migrate=True)
    store.upsert_models((CHAT,))
    clock = VirtualClock(T0)
    deps = ReconcileDeps(clock=clock, reader=cluster, node_pools=cluster, replicas=cluster,
                         placement=LocalPlacementClient(PlacementEngine()), forecasts=store,
                         decisions=store, history=store, ledger=SqlForecastLedger(store.engine),
                         sharing=cluster, mig=cluster)
    config = reconcile_config(settings, (CHAT,))
    reports = []
    for _ in range(6):
        reports.append(reconcile_once(deps, config))
        cluster.step(clock.advance(settings.reconcile.interval_s))
    return reports


def test_a_restarted_loop_keeps_a_busy_nodes_layout_that_serves_the_demand(
        sqlite_url: str) -> None:
    reports = _restarted_loop(sqlite_url, ("2g.20gb", "2g.20gb"))
    assert all(r.status is TickStatus.APPLIED for r in reports)
    # before the engine took its prior from the fleet: 5 (held 4 ticks to settle, then a drain)
    assert relayouts_asked(reports) == 0
    first = reports[0].placement
    assert first is not None
    assert sorted(s.mig_profile for s in first.segments) == ["2g.20gb", "2g.20gb"]
    assert sum(s.throughput_rps for s in first.segments) >= RATE_RPS


def test_a_restarted_loop_still_re_lays_out_a_layout_that_cannot_serve_the_demand(
        sqlite_url: str) -> None:
    reports = _restarted_loop(sqlite_url, ("1g.10gb",))  # no 1g point: it serves nothing
    asked = [a for r in reports if r.plan for a in r.plan.actions if isinstance(a, RelayoutMig)]
    assert asked and asked[0].node == "a100-0001"
    assert asked[0].to_layout.profiles_of(0) != ("1g.10gb",)
