"""The plan GetPlan and WatchPlan serve under a revision is the plan the loop recorded (and bills)
under it: the same warm pools and cost, over real gRPC on loopback, from the demo's own engine
and from a `headroom placement serve --db` that follows its store. Before, PlanFleet stored and
served its own warm-pool heuristic while the loop recorded the ladder's warm GPUs, repriced."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import grpc
from clihelpers import HEADROOM, _env
from sqlmodel import Session, select

from controlplane.adapters.clock import WallClock
from controlplane.placement_api import journaled_engine
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.tables import PlanRecord
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.server import create_server

T0 = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


@contextmanager
def _follower(db: Path) -> Iterator[pb_grpc.PlacementStub]:
    """``headroom placement serve --db DB`` on a free port, following the store's journal."""
    proc = subprocess.Popen([*HEADROOM, "placement", "serve", "--listen", "127.0.0.1:0", "--db",
                             str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    try:
        assert proc.stdout is not None
        listening = proc.stdout.readline().strip()
        assert listening.startswith("placement API listening on 127.0.0.1:"), listening
        with grpc.insecure_channel(listening.rsplit(" ", 1)[-1]) as channel:
            yield pb_grpc.PlacementStub(channel)
    finally:
        proc.kill()
        proc.wait()


def _served(plan: pb.FleetPlan) -> tuple[int, int, dict[str, int], float]:
    return (plan.revision, len(plan.gpus), {w.product: w.gpus for w in plan.warm_pools},
            plan.cost_per_hour)


def _recorded(store: Store, revision: int) -> tuple[int, int, dict[str, int], float]:
    with Session(store.engine) as session:
        row = session.exec(select(PlanRecord).where(PlanRecord.revision == revision)).one()
    assert row.warm_gpus == sum(json.loads(row.warm_gpus_json or "{}").values())
    return (row.revision, row.gpus_placed, json.loads(row.warm_gpus_json or "{}"),
            row.cost_per_hour)


def test_getplan_and_watchplan_serve_the_warm_pools_and_cost_the_loop_recorded_under_the_revision(
        tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    url = f"sqlite:///{db}"
    settings = load_settings(db={"url": url})
    store = Store.open(url, migrate=True)
    engine = journaled_engine(store, WallClock())  # as `headroom demo` and `serve` run it
    runtime = SimRuntime.open(settings, store, T0, engine=engine)
    runtime.advance(3 * settings.reconcile.interval_s)  # the first ticks, each a new revision
    server, port = create_server("127.0.0.1:0", engine)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, _follower(db) as follower:
            leader = pb_grpc.PlacementStub(channel)
            served = leader.GetPlan(pb.GetPlanRequest(), timeout=10)
            assert served.revision >= 3
            assert _served(served) == _recorded(store, served.revision)
            assert _served(follower.GetPlan(pb.GetPlanRequest(), timeout=10)) == _served(served)
            watches = [stub.WatchPlan(pb.WatchPlanRequest(after_revision=served.revision),
                                      timeout=60) for stub in (leader, follower)]
            runtime.advance(settings.reconcile.interval_s)  # one more tick, one more revision
            streamed = [next(watch) for watch in watches]
            for watch in watches:
                watch.cancel()
            assert [p.revision for p in streamed] == [served.revision + 1] * 2
            assert [_served(p) for p in streamed] == [_recorded(store, served.revision + 1)] * 2
    finally:
        server.stop(None)
