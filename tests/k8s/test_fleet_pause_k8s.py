"""A paused fleet through the API test server: the stranded replica's pool is planned a node
each tick after the grace, as unpaused, but the ticks are dry runs that write nothing to the
cluster (no NodePool limit, no placeholder, no scale); resumed, the next tick raises the pool."""

from __future__ import annotations

from datetime import UTC, datetime

from apiserver import ApiServer
from k8s_builders import TP2_LLAMA as TP2  # 2 whole A100s a replica
from stranded_scenario import fragmented_fleet, tick

from controlplane.domain.actions import ScaleNodePool
from controlplane.domain.tick import TickStatus
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.fleet_pause import SqlFleetPause

PAUSED_AT = datetime(2026, 12, 7, 23, 0, tzinfo=UTC)


def _nodes_limit(apiserver: ApiServer) -> str:
    return str(apiserver.get("karpenter.sh/v1", "NodePool", "a100-80gb")["spec"]["limits"][
        "nodes"])


def test_a_paused_fleets_ticks_write_nothing_to_the_cluster_until_it_is_resumed(
        apiserver: ApiServer, clock: VirtualClock, sqlite_url: str) -> None:
    fragmented_fleet(apiserver)
    store = Store.open(sqlite_url, migrate=True)
    store.upsert_models((TP2,))
    pause = SqlFleetPause(store.engine)
    pause.pause(PAUSED_AT, "alice", "incident 4711")
    before = len(apiserver.writes())
    reports = [tick(apiserver, clock, store) for _ in range(6)]  # past the 120 s grace

    assert {(r.status, r.reason) for r in reports} == {
        (TickStatus.DRY_RUN, "fleet_paused since 2026-12-07T23:00:00Z by alice: incident 4711")}
    last = reports[-1].plan
    assert last is not None
    planned = [(a.from_nodes, a.to_nodes) for a in last.actions if isinstance(a, ScaleNodePool)]
    assert planned == [(2, 3)]
    # the leader's Lease (created, then renewed) is all it wrote
    leases = "/apis/coordination.k8s.io/v1/namespaces/headroom/leases"
    written = {(w.method, w.path) for w in apiserver.writes()[before:]}
    assert written == {("POST", leases), ("PUT", f"{leases}/headroom-leader")}, written
    assert _nodes_limit(apiserver) == "2"

    pause.resume()
    resumed = tick(apiserver, clock, store)
    assert resumed.status is TickStatus.APPLIED
    assert _nodes_limit(apiserver) == "3"
