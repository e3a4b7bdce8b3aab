"""Property: two placement engines on one store, with leases, a shared clock and any
interleaving of Place (with or without a lease), RenewLeases, Release, sweeps, refreshes and
time passing. A Place is ALREADY_EXISTS exactly when the store holds that id with a lease still
running (or none); an id whose lease ran out is placed again at once, on either engine, swept
or not, seen by that engine or not. No GPU is ever granted beyond its whole, and after a refresh
both engines hold what an engine started on the store restores."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tick_builders import T0

from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.placement_journal import SqlPlacementJournal, live_bindings
from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import AlreadyExists, Infeasible
from scheduler.engine import PlacementEngine

T0_S = T0.timestamp()
WORKLOADS = tuple(f"w{i}" for i in range(5))
# (engine 0 or 1, operation, workload, GPU share in thousandths, lease_s, seconds to let pass)
OPS = st.lists(st.tuples(
    st.integers(0, 1), st.sampled_from(("place", "place", "renew", "release", "sweep",
                                        "refresh", "wait")),
    st.sampled_from(WORKLOADS), st.sampled_from((500, 1000)), st.sampled_from((0.0, 5.0, 20.0)),
    st.floats(0.5, 12)), min_size=1, max_size=30)


def _inventory() -> pb.SyncInventoryRequest:
    return pb.SyncInventoryRequest(nodes=[pb.Node(
        name="n0", cpu_milli=64_000, memory_mib=262_144, pool="L4",
        gpus=[pb.Gpu(index=i, product="L4", memory_mib=23_034) for i in range(2)])])


def _bindings(engine: PlacementEngine) -> dict[str, tuple[str, tuple[int, ...], int, float]]:
    return {b.workload_id: (b.node, tuple(b.gpu_indices), b.gpu_milli, b.lease_expires_at_s)
            for b in engine.list_bindings(pb.ListBindingsRequest()).bindings}


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
# the other engine has not read the journal since the lease was placed, nor has anyone swept it
@example([(0, "place", "w0", 500, 5.0, 1.0), (0, "wait", "w0", 500, 0.0, 6.0),
          (1, "place", "w0", 1000, 0.0, 1.0)])
def test_leased_ids_are_taken_exactly_while_their_lease_runs_on_either_engine(
        ops: list[tuple[int, str, str, int, float, float]]) -> None:
    now_s = [T0_S]

    def clock() -> float:
        return now_s[0]

    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{Path(tmp) / 'journal.db'}", migrate=True)

        def engine_named(name: str) -> PlacementEngine:
            journal = SqlPlacementJournal(store.engine, name, VirtualClock(T0))
            return PlacementEngine(journal=journal, now_s=clock)

        engines = [engine_named(f"e{i}") for i in range(2)]
        for engine in engines:
            engine.sync_inventory(_inventory())
        for which, op, workload, milli, lease_s, wait_s in ops:
            engine = engines[which]
            if op == "wait":
                now_s[0] += wait_s
            elif op == "place":
                held = workload in _stored(store, now_s[0])
                refused_as_taken = False
                with contextlib.suppress(Infeasible):
                    try:
                        engine.place(pb.PlaceRequest(
                            workload_id=workload, model="m", tenant="t", num_gpu=1,
                            gpu_milli=milli, cpu_milli=100, memory_mib=128, lease_s=lease_s))
                    except AlreadyExists:
                        refused_as_taken = True
                assert refused_as_taken is held, (workload, now_s[0])
            elif op == "renew":
                engine.renew_leases(pb.RenewLeasesRequest(workload_ids=[workload]))
            elif op == "release":
                engine.release(pb.ReleaseRequest(workload_id=workload))
            elif op == "sweep":
                engine.expire_leases()
            else:
                engine.refresh()
            held_now = _stored(store, now_s[0])  # read, not swept: an engine's read would sweep
            granted: dict[int, int] = {}
            for _, gpus, share, _ in held_now.values():
                for gpu in gpus:
                    granted[gpu] = granted.get(gpu, 0) + share
            assert all(total <= 1000 for total in granted.values()), held_now
        for engine in engines:
            engine.refresh()
        final = _stored(store, now_s[0])
        assert _bindings(engines[0]) == _bindings(engines[1]) == final
        assert _bindings(engine_named("restored")) == final
        store.engine.dispose()


def _stored(store: Store, now_s: float) -> dict[str, tuple[str, tuple[int, ...], int, float]]:
    """The store's bindings whose lease has not run out (straight from the table)."""
    with store.engine.connect() as connection:
        return {b.workload_id: (b.node, tuple(b.gpu_indices), b.gpu_milli, b.lease_expires_at_s)
                for b, _ in live_bindings(connection) if not b.expired(now_s)}
