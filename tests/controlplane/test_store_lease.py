"""The store's lease at the SQL level, on SQLite and PostgreSQL: each process has its own engine
(its own connections), and every write that two of them race for is won by exactly one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Engine

from controlplane.domain.lease import LeaseRecord, LeaseTiming
from controlplane.fleet_lease import StoreLeaseElector
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.lease import SqlLeaseStore

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TIMING = LeaseTiming(lease_duration_s=15, renew_deadline_s=10.0)
ROUNDS = 12


@pytest.fixture
def engines(store_url: str) -> Iterator[tuple[Engine, Engine]]:
    """Two processes' engines on one migrated store."""
    one = Store.open(store_url, migrate=True).engine
    other = Store.open(store_url).engine
    yield one, other
    one.dispose()
    other.dispose()


def _elector(engine: Engine, identity: str) -> StoreLeaseElector:
    return StoreLeaseElector(SqlLeaseStore(engine), "sim-fleet", identity, TIMING)


def _first(identity: str) -> LeaseRecord:
    return LeaseRecord(identity, 15, T0, T0, 0)


def _race(calls: list[Callable[[], bool]]) -> list[bool]:
    """Run the calls at once (each in its own thread, released by one barrier)."""
    barrier = threading.Barrier(len(calls))
    results: list[bool] = [False] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_two_connections_creating_the_first_record_at_once_leave_exactly_one_holder(
        engines: tuple[Engine, Engine]) -> None:
    stores = [SqlLeaseStore(e) for e in engines]
    for round_ in range(ROUNDS):
        name = f"race-{round_}"
        won = _race([partial(s.create_lease, name, _first(f"host-{i}"))
                     for i, s in enumerate(stores)])
        assert sorted(won) == [False, True]
        stored = stores[0].read_lease(name)
        assert stored is not None and stored.holder == f"host-{won.index(True)}"
        assert stored.resource_version == "1"


def test_two_connections_replacing_the_same_version_at_once_leave_exactly_one_winner(
        engines: tuple[Engine, Engine]) -> None:
    stores = [SqlLeaseStore(e) for e in engines]
    assert stores[0].create_lease("sim-fleet", _first("gone-1"))
    for round_ in range(ROUNDS):
        seen = stores[0].read_lease("sim-fleet")
        assert seen is not None
        renewed_at = T0 + timedelta(seconds=round_)
        won = _race([partial(s.replace_lease, "sim-fleet",
                             replace(seen, holder=f"host-{i}", renew_at=renewed_at))
                     for i, s in enumerate(stores)])
        assert sorted(won) == [False, True]
        after = stores[1].read_lease("sim-fleet")
        assert after is not None and after.holder == f"host-{won.index(True)}"
        assert int(after.resource_version) == int(seen.resource_version) + 1


def test_a_write_decided_on_a_version_another_process_has_since_written_changes_nothing(
        engines: tuple[Engine, Engine]) -> None:
    one, other = (SqlLeaseStore(e) for e in engines)
    assert one.create_lease("sim-fleet", _first("host-a"))
    seen = one.read_lease("sim-fleet")
    assert seen is not None
    assert other.replace_lease("sim-fleet", replace(seen, renew_at=T0 + timedelta(seconds=5)))
    assert not one.replace_lease("sim-fleet", replace(seen, holder="host-b"))
    stored = one.read_lease("sim-fleet")
    assert stored is not None and stored.holder == "host-a"
    assert stored.renew_at == T0 + timedelta(seconds=5)


def test_a_live_holder_keeps_the_lease_and_a_silent_one_is_taken_over_after_the_duration(
        engines: tuple[Engine, Engine]) -> None:
    a, b = _elector(engines[0], "host-a"), _elector(engines[1], "host-b")
    assert a.try_acquire_or_renew(T0)
    for second in range(0, 60, 3):  # a renews every 3 s: b never sees the lease expire
        now = T0 + timedelta(seconds=second)
        assert a.try_acquire_or_renew(now)
        assert not b.try_acquire_or_renew(now)
        assert a.is_leader(now) and not b.is_leader(now)
    last_renewal = T0 + timedelta(seconds=57)  # b saw it at once, in the loop's last round
    assert not b.try_acquire_or_renew(last_renewal + timedelta(seconds=14))
    assert not a.is_leader(last_renewal + timedelta(seconds=10))  # a stopped acting first
    assert b.try_acquire_or_renew(last_renewal + timedelta(seconds=15))
    stored = b.leases.read_lease("sim-fleet")
    assert stored is not None and stored.holder == "host-b" and stored.transitions == 1


def test_a_holder_whose_lease_was_taken_over_stops_for_good_and_says_so(
        engines: tuple[Engine, Engine], caplog: pytest.LogCaptureFixture) -> None:
    a, b = _elector(engines[0], "host-a"), _elector(engines[1], "host-b")
    assert a.try_acquire_or_renew(T0)
    assert not b.try_acquire_or_renew(T0 + timedelta(seconds=1))
    assert b.try_acquire_or_renew(T0 + timedelta(seconds=16))  # a was stalled: taken over
    with caplog.at_level(logging.INFO, logger="headroom.lease"):
        assert not a.try_acquire_or_renew(T0 + timedelta(seconds=17))
    assert a.lost and not a.is_leader(T0 + timedelta(seconds=17))
    assert [r.getMessage() for r in caplog.records] == ["lease.lost"]
    assert caplog.records[0].now_held_by == "host-b"  # type: ignore[attr-defined]
    b.release()  # even a released lease is not taken back: a's fleet in memory is stale
    assert not a.try_acquire_or_renew(T0 + timedelta(seconds=18))
    a.release()  # and a lost holder does not release what is no longer its own
    stored = b.leases.read_lease("sim-fleet")
    assert stored is not None and stored.holder == ""


def test_a_released_lease_is_taken_at_once_by_the_next_process(
        engines: tuple[Engine, Engine]) -> None:
    a, b = _elector(engines[0], "host-a"), _elector(engines[1], "host-b")
    assert a.try_acquire_or_renew(T0)
    assert not b.try_acquire_or_renew(T0 + timedelta(seconds=1))
    a.release()
    assert not a.is_leader(T0 + timedelta(seconds=2))
    assert b.try_acquire_or_renew(T0 + timedelta(seconds=2))  # not 15 s later
    assert b.is_leader(T0 + timedelta(seconds=2))


def test_a_renewal_the_store_refuses_pauses_the_writes_until_one_succeeds(
        engines: tuple[Engine, Engine], caplog: pytest.LogCaptureFixture) -> None:
    a = _elector(engines[0], "host-a")
    assert a.try_acquire_or_renew(T0)
    with engines[1].begin() as connection:  # the store loses the table under the holder
        connection.execute(text("ALTER TABLE leases RENAME TO leases_away"))
    with caplog.at_level(logging.INFO, logger="headroom.lease"):
        assert not a.try_acquire_or_renew(T0 + timedelta(seconds=3))
        assert not a.is_leader(T0 + timedelta(seconds=3))  # well inside its renew deadline
        with engines[1].begin() as connection:
            connection.execute(text("ALTER TABLE leases_away RENAME TO leases"))
        assert a.try_acquire_or_renew(T0 + timedelta(seconds=6))
    assert a.is_leader(T0 + timedelta(seconds=6)) and not a.lost
    assert [r.getMessage() for r in caplog.records] == ["lease.renew_failed", "lease.renewed"]
    assert "leases" in caplog.records[0].error  # type: ignore[attr-defined]


def test_the_leases_table_comes_with_revision_0004_and_goes_with_its_downgrade(
        store_url: str) -> None:
    engine = create_engine(store_url.replace("postgresql://", "postgresql+psycopg://"))
    store = Store.open(store_url, migrate=True)
    assert "leases" in inspect(engine).get_table_names()
    downgrade(store.engine, "0003")
    assert "leases" not in inspect(engine).get_table_names()
    assert "issued_forecasts" in inspect(engine).get_table_names()
    upgrade(store.engine)
    assert "leases" in inspect(engine).get_table_names()
    store.engine.dispose()
    engine.dispose()


ACTORS = st.sampled_from(["host-a", "host-b"])
STEPS = st.lists(st.tuples(ACTORS, st.sampled_from(["acquire_or_renew", "release"]),
                           st.integers(min_value=0, max_value=12)), max_size=25)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_two_processes_acting_in_any_order_never_both_lead(
        engines: tuple[Engine, Engine], steps: list[tuple[str, str, int]]) -> None:
    with engines[0].begin() as connection:
        connection.execute(text("DELETE FROM leases"))
    electors = {"host-a": _elector(engines[0], "host-a"), "host-b": _elector(engines[1], "host-b")}
    now = T0
    for actor, action, wait_s in steps:
        now += timedelta(seconds=wait_s)
        if action == "release":
            electors[actor].release()
        else:
            electors[actor].try_acquire_or_renew(now)
        leaders = [name for name, e in electors.items() if e.is_leader(now)]
        assert len(leaders) <= 1
        stored = electors["host-a"].leases.read_lease("sim-fleet")
        assert all(stored is not None and stored.holder == name for name in leaders)
