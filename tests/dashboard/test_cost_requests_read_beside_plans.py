"""Showback (the Cost page, the Overview's $ per 1M requests, ``headroom cost export``) reads the
requests served per day in a thread of its own while it reads and prices the plans, on a store
whose engine gives each thread its own connection (a SQLite file, PostgreSQL): on a large store
both reads take most of a page's first render. An in-memory SQLite store (one database per
thread) is read in one thread. The figures are the same either way. And the dashboard's
process moves what its imports made out of the garbage collector's sight once
(``freeze_imported_heap``): a first render's many objects then set off no full collection that
walks that heap again.

The store: bert-embed serving 500 rps on one L4 of 2 nodes, ticks every 30 min from 20:00 UTC
to 04:00 the next day (two UTC days)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dashboard_support import bert_on_one_l4_tick
from sqlalchemy import event

from controlplane import cost_export, cost_reader
from controlplane.domain.desired import PoolSpec
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from dashboard.context import freeze_imported_heap

BERT = next(s for s in DEMO_MODELS if s.name == "bert-embed")
SINCE_AT = datetime(2026, 3, 2, 20, 0, tzinfo=UTC)
UNTIL_AT = SINCE_AT + timedelta(hours=8)


def _seeded(url: str) -> Store:
    store = Store.open(url, migrate=True)
    store.upsert_models([BERT])
    store.upsert_prices([PoolSpec("l4", "L4", 4, 0, 4, 0.80)], SINCE_AT - timedelta(hours=1))
    at = SINCE_AT
    while at <= UNTIL_AT:
        report = bert_on_one_l4_tick(at, 2, 500.0)
        store.save_tick(report)
        store.save_observed(report.observed)
        at += timedelta(minutes=30)
    return store


def _threads_reading(store: Store) -> tuple[dict[str, set[int]], cost_export.Showback]:
    """The threads that read the observations and the plans during a showback."""
    readers: dict[str, set[int]] = {"observations": set(), "plans": set()}

    def capture(conn: object, cursor: object, statement: str, parameters: Sequence[Any],
                context: object, executemany: bool) -> None:
        for marker, name in (("FROM observations", "observations"), ("JOIN plans", "plans")):
            if marker in statement:
                readers[name].add(threading.get_ident())

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        result = cost_export.showback(store.engine, cost_reader.price_history(store.engine),
                                      SINCE_AT, UNTIL_AT)
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    return readers, result


def test_a_store_file_has_its_requests_read_beside_its_plans_an_in_memory_one_in_one_thread(
        sqlite_url: str) -> None:
    readers, from_file = _threads_reading(_seeded(sqlite_url))
    assert readers["plans"] == {threading.get_ident()}
    assert readers["observations"] and threading.get_ident() not in readers["observations"]
    # 500 rps over each day's observations: 20:00-24:00 and 00:00-04:00 (the last tick's
    # observation is past the window's end)
    assert from_file.requests == {
        ("2026-03-02", "bert-embed"): pytest.approx(500.0 * 4 * 3600),
        ("2026-03-03", "bert-embed"): pytest.approx(500.0 * 4 * 3600)}
    readers, in_memory = _threads_reading(_seeded("sqlite://"))
    assert readers["observations"] == readers["plans"] == {threading.get_ident()}
    assert in_memory.requests == from_file.requests
    assert in_memory.accruals == from_file.accruals


def test_the_dashboard_moves_its_imported_heap_out_of_the_collectors_sight_once_a_process(
        ) -> None:
    gc.unfreeze()
    freeze_imported_heap.cache_clear()
    try:
        freeze_imported_heap()
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # the modules, classes and functions imported so far
        made_since = [[n] for n in range(1000)]
        freeze_imported_heap()
        assert gc.get_freeze_count() == frozen, len(made_since)
    finally:
        gc.unfreeze()
        freeze_imported_heap.cache_clear()
