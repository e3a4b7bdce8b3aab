"""A Place on a store's journal whose caller gives up while it runs: the deadline passing while
the change waits for the journal's lock or writes rolls the change back (nothing bound, a retry
places it), and one that passes only during the commit leaves it bound, which a retry of the
same Place finds as ALREADY_EXISTS carrying that binding (the reconcile README describes). The
slow part is injected around the real SQL journal, never left to timing luck."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import grpc
import pytest
from placement_builders import make_node, make_place

from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.placement_journal import SqlPlacementJournal, live_bindings
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.domain.errors import AlreadyExists, CallerGone
from scheduler.engine import PlacementEngine
from scheduler.journal import JournalChange, JournalChanges
from scheduler.server import create_server, stop
from scheduler.service import BINDING_TRAILER

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)


class PausingJournal:
    """The store's SQL journal with ``pause`` run once inside the next change: at ``"lock"``
    as soon as the change holds the journal's lock (a long wait for it, before the engine
    writes), at ``"commit"`` after the engine wrote, before the commit (a slow commit)."""

    def __init__(self, inner: SqlPlacementJournal, at: str, pause: Callable[[], None]) -> None:
        self.inner, self.at, self.pause = inner, at, pause
        self.armed = False
        self.finished = threading.Event()  # the armed change ended, committed or not

    def read(self, since_version: int) -> JournalChanges:
        return self.inner.read(since_version)

    @contextmanager
    def change(self, since_version: int) -> Iterator[JournalChange]:
        armed, self.armed = self.armed, False
        try:
            with self.inner.change(since_version) as change:
                if armed and self.at == "lock":
                    self.pause()
                yield change
                if armed and self.at == "commit":
                    self.pause()
        finally:
            if armed:
                self.finished.set()


@pytest.fixture
def store(sqlite_url: str) -> Iterator[Store]:
    opened = Store.open(sqlite_url, migrate=True)
    try:
        yield opened
    finally:
        opened.engine.dispose()


def _engine(store: Store, at: str, pause: Callable[[], None]
            ) -> tuple[PlacementEngine, PausingJournal]:
    journal = PausingJournal(SqlPlacementJournal(store.engine, "test", VirtualClock(T0)), at,
                             pause)
    engine = PlacementEngine(journal=journal, now_s=T0.timestamp)
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]))
    return engine, journal


def _stored(store: Store) -> list[str]:
    with store.engine.connect() as connection:
        return [b.workload_id for b, _ in live_bindings(connection)]


def test_a_deadline_passing_while_the_change_waits_for_the_journal_binds_nothing(
        store: Store) -> None:
    deadline_passed = [False]
    engine, journal = _engine(store, "lock", lambda: deadline_passed.__setitem__(0, True))
    journal.armed = True
    with pytest.raises(CallerGone, match=r"'w1'.*nothing was bound"):
        engine.place(make_place("w1"), still_wanted=lambda: not deadline_passed[0])
    assert _stored(store) == [] and engine.binding("w1") is None
    retried = engine.place(make_place("w1"))  # placed, not ALREADY_EXISTS
    assert retried.binding.node == "n0" and _stored(store) == ["w1"]


def test_a_deadline_passing_only_during_the_commit_leaves_the_binding_which_a_retry_finds(
        store: Store) -> None:
    deadline_passed = [False]
    engine, journal = _engine(store, "commit", lambda: deadline_passed.__setitem__(0, True))
    journal.armed = True
    first = engine.place(make_place("w1"), still_wanted=lambda: not deadline_passed[0])
    assert deadline_passed[0] and _stored(store) == ["w1"]  # gone, yet bound: reconcile
    with pytest.raises(AlreadyExists) as err:
        engine.place(make_place("w1"))
    assert err.value.binding is not None
    assert err.value.binding.node == first.binding.node
    assert list(err.value.binding.gpu_indices) == list(first.binding.gpu_indices)


def _trailer(error: grpc.RpcError) -> pb.Binding | None:
    trailing = error.trailing_metadata() or ()
    blobs = [m.value for m in trailing if m.key == BINDING_TRAILER]
    return pb.Binding.FromString(blobs[0]) if blobs else None


def test_over_grpc_a_place_that_timed_out_waiting_for_the_journal_is_not_bound(
        store: Store) -> None:
    engine, journal = _engine(store, "lock", lambda: time.sleep(0.8))
    server, port = create_server("127.0.0.1:0", engine)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.PlacementStub(channel)
            journal.armed = True
            with pytest.raises(grpc.RpcError) as err:
                stub.Place(make_place("w1"), timeout=0.3)
            assert err.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            assert journal.finished.wait(5)
            assert _stored(store) == []
            placed = stub.Place(make_place("w1"), timeout=5)  # the retry binds it
            with pytest.raises(grpc.RpcError) as again:
                stub.Place(make_place("w1"), timeout=5)
        assert again.value.code() is grpc.StatusCode.ALREADY_EXISTS
        assert _trailer(again.value) == placed.binding
    finally:
        stop(server, grace_s=0.5)


def test_an_already_exists_place_carries_the_binding_held_under_its_id() -> None:
    server, port = create_server("127.0.0.1:0", PlacementEngine())
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.PlacementStub(channel)
            stub.SyncInventory(pb.SyncInventoryRequest(nodes=[make_node("n0")]), timeout=5)
            placed = stub.Place(make_place("w1", tenant="alpha"), timeout=5)
            with pytest.raises(grpc.RpcError) as again:
                stub.Place(make_place("w1", gpu_milli=500, tenant="alpha"), timeout=5)
        assert again.value.code() is grpc.StatusCode.ALREADY_EXISTS
        assert _trailer(again.value) == placed.binding  # compare it with what was asked
    finally:
        stop(server, grace_s=0.5)
