"""Property: whatever sequence of Place, Release, SyncInventory and refresh two placement
engines on one store run, in any interleaving, no GPU is ever granted more than its whole, a
Place that succeeded is in the journal and a Release (through either engine) takes the workload
out of it, and after a refresh both engines hold exactly the bindings the journal holds (a third
engine started on the store restores the same)."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tick_builders import T0

from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.placement_journal import SqlPlacementJournal
from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import AlreadyExists, Infeasible
from scheduler.engine import PlacementEngine

NODES = ("n0", "n1")
WORKLOADS = tuple(f"w{i}" for i in range(6))
# (engine 0 or 1, operation, workload, GPU share in thousandths, nodes of the inventory)
OPS = st.lists(st.tuples(
    st.integers(0, 1), st.sampled_from(("place", "release", "sync", "refresh")),
    st.sampled_from(WORKLOADS), st.sampled_from((250, 500, 1000)),
    st.sampled_from((NODES, NODES[:1]))), min_size=1, max_size=25)


def _inventory(nodes: tuple[str, ...]) -> pb.SyncInventoryRequest:
    return pb.SyncInventoryRequest(nodes=[pb.Node(
        name=n, cpu_milli=64_000, memory_mib=262_144, pool="L4",
        gpus=[pb.Gpu(index=i, product="L4", memory_mib=23_034) for i in range(2)])
        for n in nodes])


def _bindings(engine: PlacementEngine) -> dict[str, tuple[str, tuple[int, ...], int]]:
    found = {}
    for workload in WORKLOADS:
        binding = engine.binding(workload)
        if binding is not None:
            found[workload] = (binding.node, tuple(binding.gpu_indices), binding.gpu_milli)
    return found


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_two_engines_on_one_journal_never_oversubscribe_and_converge(
        ops: list[tuple[int, str, str, int, tuple[str, ...]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{Path(tmp) / 'journal.db'}", migrate=True)
        def journal(name: str) -> SqlPlacementJournal:
            return SqlPlacementJournal(store.engine, name, VirtualClock(T0))

        engines = [PlacementEngine(journal=journal(f"e{i}")) for i in range(2)]
        for engine in engines:
            engine.sync_inventory(_inventory(NODES))
        for which, op, workload, milli, nodes in ops:
            engine = engines[which]
            bound: bool | None = None  # what the journal must say of the workload after it
            if op == "place":
                with contextlib.suppress(AlreadyExists, Infeasible):
                    engine.place(pb.PlaceRequest(workload_id=workload, model="m", tenant="t",
                                                 num_gpu=1, gpu_milli=milli, cpu_milli=100,
                                                 memory_mib=128))
                    bound = True
            elif op == "release":
                bound = False
                engine.release(pb.ReleaseRequest(workload_id=workload))
            elif op == "sync":
                engine.sync_inventory(_inventory(nodes))
            else:
                engine.refresh()
            restored = PlacementEngine(journal=journal("observer"))
            held = _bindings(restored)
            granted: dict[tuple[str, int], int] = {}
            for node, gpus, share in held.values():
                for gpu in gpus:
                    granted[(node, gpu)] = granted.get((node, gpu), 0) + share
            assert all(total <= 1000 for total in granted.values()), held
            if bound is not None:
                assert (workload in held) is bound, (op, workload, held)
        for engine in engines:
            engine.refresh()
        final = _bindings(PlacementEngine(journal=journal("observer")))
        assert _bindings(engines[0]) == _bindings(engines[1]) == final
        store.engine.dispose()
