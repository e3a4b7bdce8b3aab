"""A migration waits a bounded time for another migrator's PostgreSQL advisory lock
(``db.migration_lock_wait_s``), then fails naming the lock and the setting, the schema as it
was."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from clihelpers import HEADROOM, WARM_HEADROOM, _env
from sqlalchemy import create_engine

from controlplane.settings import ConfigError, load_settings
from controlplane.store import MigrationError, Store, upgrade
from controlplane.store.engine import store_revision
from controlplane.store.migration_lock import DEFAULT_MIGRATION_LOCK_WAIT_S, MIGRATION_LOCK_KEY

WAIT_S = 2.0


@contextmanager
def migration_lock_held(url: str) -> Iterator[None]:
    """Another migrator mid-migration: a second connection holding the advisory lock."""
    engine = create_engine(url)
    with engine.connect() as connection:
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
        yield
        connection.rollback()
    engine.dispose()


def _store_at(url: str, revision: str) -> None:
    store = Store.open(url)
    upgrade(store.engine, revision)
    store.engine.dispose()


def _revision(url: str) -> str | None:
    engine = create_engine(url)
    try:
        return store_revision(engine)
    finally:
        engine.dispose()


def test_db_upgrade_gives_up_on_a_held_migration_lock_after_the_bound_leaving_the_schema(
        postgres_url: str) -> None:
    _store_at(postgres_url, "0008")
    env = _env(HEADROOM_DB__URL=postgres_url, HEADROOM_DB__MIGRATION_LOCK_WAIT_S=str(WAIT_S))
    with migration_lock_held(postgres_url):
        started_at = time.monotonic()
        run = subprocess.run([*WARM_HEADROOM, "db", "upgrade"], env=env, capture_output=True,
                             text=True, timeout=120)
        took_s = time.monotonic() - started_at
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1
    assert "another migration holds the store's migration lock" in run.stderr
    assert f"gave up after {WAIT_S:g} s; raise db.migration_lock_wait_s" in run.stderr
    assert WAIT_S <= took_s < WAIT_S + 30  # the bound, plus the command's start
    assert _revision(postgres_url) == "0008"  # nothing applied


def test_opening_a_store_that_migrates_gives_up_on_a_held_migration_lock_after_the_bound(
        postgres_url: str) -> None:
    with migration_lock_held(postgres_url):
        started_at = time.monotonic()
        with pytest.raises(MigrationError) as caught:
            Store.open(postgres_url, migrate=True, migration_lock_wait_s=WAIT_S)
        took_s = time.monotonic() - started_at
    assert "another migration holds the store's migration lock" in str(caught.value)
    assert WAIT_S <= took_s < WAIT_S + 5
    assert _revision(postgres_url) is None  # never migrated, as before


def test_a_migration_goes_ahead_once_the_other_migrator_lets_go_within_the_bound(
        postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    connection = engine.connect()
    connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
    env = _env(HEADROOM_DB__URL=postgres_url, HEADROOM_DB__MIGRATION_LOCK_WAIT_S="60")
    upgrading = subprocess.Popen([*HEADROOM, "db", "upgrade"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    connection.rollback()
    connection.close()
    engine.dispose()
    _, stderr = upgrading.communicate(timeout=120)
    assert upgrading.returncode == 0, stderr
    assert _revision(postgres_url) is not None


@pytest.mark.parametrize("value", ["0", "-1", "inf"])
def test_a_migration_lock_wait_that_is_not_a_positive_duration_is_refused(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("HEADROOM_DB__MIGRATION_LOCK_WAIT_S", value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "db.migration_lock_wait_s" in str(caught.value)


def test_the_migration_lock_wait_defaults_to_five_minutes_in_settings_and_store_alike() -> None:
    assert load_settings().db.migration_lock_wait_s == DEFAULT_MIGRATION_LOCK_WAIT_S == 300.0
