"""The store with more than one process at it: the two replicas of deploy/ migrating a new
database at once, processes writing the models and prices at once, two loops saving the
observed fleet at once, and a migration that fails halfway."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from tick_builders import T0

from controlplane.domain.desired import PoolSpec
from controlplane.domain.observed import ObservedGpu, ObservedModel, ObservedNode, ObservedState
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import MigrationError, Store
from controlplane.store.engine import make_engine

PROCESSES = 3
SAVES = 20


def fleet(at_s: int) -> ObservedState:
    """Four L4 nodes of one GPU each and one model, observed ``at_s`` after T0."""
    nodes = tuple(ObservedNode(f"l4-{i}", "l4", "L4", True, 8000, 32768,
                               (ObservedGpu(0, "L4", 23034, False),)) for i in range(4))
    return ObservedState(T0 + timedelta(seconds=at_s), (), nodes,
                         (ObservedModel("bert-embed", 1, 0, 1, 10.0, 40.0),))


def _migrate(url: str, barrier: multiprocessing.synchronize.Barrier,
             results: multiprocessing.Queue[str]) -> None:
    barrier.wait()
    try:
        Store.open(url, migrate=True)
        results.put("ok")
    except Exception as error:  # reported to the test, which names it
        results.put(f"{type(error).__name__}: {error}")


def _save_observed(url: str, barrier: multiprocessing.synchronize.Barrier,
                   results: multiprocessing.Queue[str]) -> None:
    store = Store.open(url)
    barrier.wait()
    failures = []
    for i in range(SAVES):
        try:
            store.save_observed(fleet(30 * i))
        except Exception as error:  # counted and named for the test
            failures.append(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    results.put("; ".join(failures) or "ok")


def _upsert_models_and_prices(url: str, barrier: multiprocessing.synchronize.Barrier,
                              results: multiprocessing.Queue[str]) -> None:
    store = Store.open(url)
    barrier.wait()
    try:
        store.upsert_models(DEMO_MODELS)
        store.upsert_prices([PoolSpec("l4", "L4", 1, 0, 4, 0.75)])
        results.put("ok")
    except Exception as error:  # reported to the test, which names it
        results.put(f"{type(error).__name__}: {str(error).splitlines()[0]}")


def run_at_once(target: Callable[..., None], *args: object) -> list[str]:
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


def test_processes_writing_the_models_and_prices_at_once_all_land(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    assert run_at_once(_upsert_models_and_prices, store_url) == ["ok"] * PROCESSES
    assert store.model_specs() == sorted(DEMO_MODELS, key=lambda s: s.name)
    store.upsert_prices([PoolSpec("l4", "L4", 1, 0, 4, 0.6)])  # was 0.75
    with store.engine.connect() as connection:
        prices = connection.exec_driver_sql(
            "SELECT product, price_per_gpu_hour FROM gpu_prices").all()
    assert [tuple(p) for p in prices] == [("L4", 0.6)]  # updated in place


def test_loops_saving_the_observed_fleet_at_once_each_replace_the_inventory_whole(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    assert run_at_once(_save_observed, store_url) == ["ok"] * PROCESSES
    with store.engine.connect() as connection:
        gpus = connection.exec_driver_sql("SELECT node FROM gpus ORDER BY node").scalars().all()
        observations = connection.exec_driver_sql("SELECT count(*) FROM observations").scalar()
    assert gpus == ["l4-0", "l4-1", "l4-2", "l4-3"]
    assert observations == PROCESSES * SAVES


def test_a_sqlite_migration_that_fails_halfway_leaves_no_table_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = create_engine(url)
    with engine.begin() as connection:  # in the way of migration 0001's later tables
        connection.exec_driver_sql("CREATE TABLE ticks (x INTEGER)")
    with pytest.raises(MigrationError, match="table ticks already exists"):
        Store.open(url, migrate=True)
    assert inspect(engine).get_table_names() == ["ticks"]


def _open_new(path: str, barrier: multiprocessing.synchronize.Barrier,
              results: multiprocessing.Queue[str]) -> None:
    barrier.wait()
    try:
        make_engine(f"sqlite:///{path}").dispose()
        results.put("ok")
    except Exception as error:  # reported to the test, which names it
        results.put(f"{type(error).__name__}: {error}")


def test_processes_opening_the_same_new_sqlite_file_at_once_all_connect(tmp_path: Path) -> None:
    # Each open switches the new file to WAL; two processes doing it at once used to deadlock
    # on SQLite's locks, and SQLite fails one of them at once ("database is locked": 7 of 160
    # opens in 40 rounds of 4 before the retry). Forked, so that many rounds stay quick.
    context = multiprocessing.get_context("fork")
    failures = []
    for round_ in range(30):
        path = tmp_path / f"new-{round_}.db"
        barrier = context.Barrier(4)
        results: multiprocessing.Queue[str] = context.Queue()
        processes = [context.Process(target=_open_new, args=(str(path), barrier, results))
                     for _ in range(4)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
        failures += [got for got in (results.get(timeout=5) for _ in processes) if got != "ok"]
        assert path.is_file()
    assert failures == []
