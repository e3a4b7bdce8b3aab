"""The store with more than one process at it: the two replicas of deploy/ migrating a new
database at once, and a migration that fails halfway."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from controlplane.store import MigrationError, Store

PROCESSES = 3


def _migrate(url: str, barrier: multiprocessing.synchronize.Barrier,
             results: multiprocessing.Queue[str]) -> None:
    barrier.wait()
    try:
        Store.open(url, migrate=True)
        results.put("ok")
    except Exception as error:  # reported to the test, which names it
        results.put(f"{type(error).__name__}: {error}")


def run_at_once(target: object, *args: object) -> list[str]:
    """Run ``target(*args, barrier, results)`` in PROCESSES fresh interpreters released together;
    what each put in ``results``."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results: multiprocessing.Queue[str] = context.Queue()
    processes = [context.Process(target=target, args=(*args, barrier, results))
                 for _ in range(PROCESSES)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    return sorted(results.get(timeout=5) for _ in processes)


def test_processes_that_migrate_a_new_store_at_once_all_start(store_url: str) -> None:
    assert run_at_once(_migrate, store_url) == ["ok"] * PROCESSES
    assert "issued_forecasts" in inspect(create_engine(store_url)).get_table_names()


def test_a_sqlite_migration_that_fails_halfway_leaves_no_table_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = create_engine(url)
    with engine.begin() as connection:  # in the way of migration 0001's later tables
        connection.exec_driver_sql("CREATE TABLE ticks (x INTEGER)")
    with pytest.raises(MigrationError, match="table ticks already exists"):
        Store.open(url, migrate=True)
    assert inspect(engine).get_table_names() == ["ticks"]
