"""A PostgreSQL statement blocked on a table lock another session holds (a backup, a transaction
left open) leaves nothing queued on the server once Headroom gives up on it: a migration's wait
for a table lock is bounded on the server (lock_timeout, below db.response_timeout_s) and fails
naming the lock, nothing applied; any statement the client-side response timeout gives up on is
cancelled on the server, not left waiting there holding its locks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from controlplane.store import MigrationError, Store, upgrade
from controlplane.store.engine import make_engine, scripts, store_revision

RESPONSE_TIMEOUT_S = 4.0
SETTLE_S = 5.0  # how long the server may take to act on a cancel or a rollback


@contextmanager
def table_read_open(url: str, table: str) -> Iterator[None]:
    """Another session inside a transaction that read ``table`` (its ACCESS SHARE lock kept
    until the transaction ends), as a backup or an idle transaction does."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text(f"SELECT count(*) FROM {table}"))
            yield
            connection.rollback()
    finally:
        engine.dispose()


def backends_waiting_on_a_lock(url: str) -> list[str]:
    """The queries of the sessions of ``url``'s database waiting on a lock, polled until none
    is left or ``SETTLE_S`` passed."""
    engine = create_engine(url)
    deadline_at = time.monotonic() + SETTLE_S
    try:
        while True:
            with engine.connect() as connection:
                waiting = list(connection.execute(text(
                    "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")).scalars())
            if not waiting or time.monotonic() >= deadline_at:
                return waiting
            time.sleep(0.1)
    finally:
        engine.dispose()


@contextmanager
def store_before_0020(url: str) -> Iterator[Store]:
    """A store at 0019 (0020 alters ``plans``), its waits bounded by ``RESPONSE_TIMEOUT_S``."""
    store = Store.open(url, response_timeout_s=RESPONSE_TIMEOUT_S)
    try:
        upgrade(store.engine, "0019")
        yield store
    finally:
        store.engine.dispose()


def read_within_a_second(url: str, table: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text("SET statement_timeout = '1s'"))
            return int(connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_migration_blocked_by_a_table_lock_fails_naming_it_and_leaves_nothing_queued(
        postgres_url: str) -> None:
    with store_before_0020(postgres_url) as store:
        with table_read_open(postgres_url, "plans"):
            started_at = time.monotonic()
            with pytest.raises(MigrationError) as raised:
                upgrade(store.engine)
            took_s = time.monotonic() - started_at
            assert backends_waiting_on_a_lock(postgres_url) == []
            assert read_within_a_second(postgres_url, "plans") == 0
        assert store_revision(store.engine) == "0019"  # nothing applied
    message = str(raised.value)
    assert "cannot upgrade to 'head': a table lock on table 'plans' is held by another " \
           "session (e.g. a backup or an open transaction): retry when it ends; nothing was " \
           "applied" in message
    assert "no answer from the database server" not in message
    assert RESPONSE_TIMEOUT_S / 2 - 0.5 < took_s < RESPONSE_TIMEOUT_S


@pytest.mark.postgres
def test_the_migration_goes_ahead_once_the_session_holding_the_table_lock_ends(
        postgres_url: str) -> None:
    with store_before_0020(postgres_url) as store:
        with table_read_open(postgres_url, "plans"), pytest.raises(MigrationError):
            upgrade(store.engine)
        upgrade(store.engine)
        assert store_revision(store.engine) == scripts().get_current_head()


@pytest.mark.postgres
def test_a_statement_the_response_timeout_gives_up_on_is_cancelled_on_the_server(
        postgres_url: str) -> None:
    """Without a lock_timeout (an ordinary Headroom connection) a statement waiting on a lock
    outlives the response timeout: the client's give-up must not leave it queued there."""
    setup = create_engine(postgres_url)
    with setup.begin() as connection:
        connection.execute(text("CREATE TABLE held (id int)"))
    setup.dispose()
    engine = make_engine(postgres_url, connect_timeout_s=2, response_timeout_s=2)
    try:
        with table_read_open(postgres_url, "held"):
            with engine.connect() as connection, pytest.raises(OperationalError) as raised:
                connection.execute(text("ALTER TABLE held ADD COLUMN note text"))
            assert "no answer from the database server" in str(raised.value)
            assert backends_waiting_on_a_lock(postgres_url) == []
            assert read_within_a_second(postgres_url, "held") == 0
    finally:
        engine.dispose()
