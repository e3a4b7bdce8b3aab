"""Requests served per model and day (``cost_reader.served_requests``, read once a day of the
window by the Cost page, the Overview and ``cost export``) come from the observations' index
alone (migration 0025; 0030 adds what arrived to it): through the (model, at) index each row was
fetched from the table, where a model's rows lie one to a page among every other model's: 9 s
for a week of 200 models."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, inspect
from tick_builders import T0, sample_tick_report

from controlplane import cost_reader
from controlplane.cost_reader import ServedRequests
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.store import Store, downgrade, upgrade

MODELS = ("bert-embed", "llama-8b", "mistral-7b")


def _observed(at_s: int) -> ObservedState:
    return ObservedState(T0 + timedelta(seconds=at_s), (), (), tuple(
        ObservedModel(name, 2, 0, 2, 10.0 + i, 12.0, latency_ms=None)
        for i, name in enumerate(MODELS)))


def _observed_store(url: str) -> Store:
    """A store with one tick at T0 (requests count from the first tick on) and ten minutes of
    the three models' observations."""
    store = Store.open(url, migrate=True)
    store.save_tick(sample_tick_report())
    for at_s in range(0, 600, 60):
        store.save_observed(_observed(at_s))
    return store


def _plans_of_served_requests(store: Store) -> dict[str, tuple[str, str]]:
    """The statements ``served_requests`` runs for the listed models and SQLite's plan of each:
    the grouped read ("grouped") and the lookup of each model's first and last observation
    ("ends")."""
    seen: list[tuple[str, Sequence[Any]]] = []

    def capture(conn: object, cursor: object, statement: str, parameters: Sequence[Any],
                context: object, executemany: bool) -> None:
        if "FROM observations" in statement:
            seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        served = cost_reader.served_requests(store.engine, list(MODELS), T0,
                                             T0 + timedelta(hours=1))
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    assert set(served) == set(MODELS)
    (grouped, grouped_parameters), = [s for s in seen if "GROUP BY" in s[0]]
    (ends, ends_parameters), = [s for s in seen if "GROUP BY" not in s[0]]
    with store.engine.connect() as connection:
        return {name: (statement, "\n".join(str(row[-1]) for row in connection.exec_driver_sql(
                    f"EXPLAIN QUERY PLAN {statement}", parameters).all()))
                for name, statement, parameters in (("grouped", grouped, grouped_parameters),
                                                    ("ends", ends, ends_parameters))}


def test_the_requests_served_per_model_are_read_from_the_index_alone_in_its_order(
        sqlite_url: str) -> None:
    _, plan = _plans_of_served_requests(_observed_store(sqlite_url))["grouped"]
    assert "USING COVERING INDEX ix_observations_model_at_load" in plan, plan
    assert "TEMP B-TREE" not in plan, plan  # grouped by model in the index's order


def test_a_models_first_and_last_observation_are_two_index_lookups_not_a_pass_over_its_rows(
        sqlite_url: str) -> None:
    plans = _plans_of_served_requests(_observed_store(sqlite_url))
    grouped, _ = plans["grouped"]
    assert "min(" not in grouped.lower() and "max(" not in grouped.lower(), grouped
    _, ends = plans["ends"]
    assert "SCAN observations" not in ends, ends
    assert ("SEARCH observations USING COVERING INDEX ix_observations_model_at_load "
            "(model=? AND at>? AND at<?)") in ends, ends


def _indexes(store: Store) -> dict[str, list[str]]:
    return {str(i["name"]): [str(c) for c in i["column_names"]]
            for i in inspect(store.engine).get_indexes("observations")}


def _served(store: Store, models: list[str] | None) -> dict[str, ServedRequests]:
    return cost_reader.served_requests(store.engine, models, T0, T0 + timedelta(hours=1))


def test_migrations_0025_and_0030_widen_the_model_time_index_and_their_downgrades_restore_it(
        store_url: str) -> None:
    store = _observed_store(store_url)
    # 10 observations a minute apart cover 10 minutes: bert-embed serves its 10 rps throughout
    widened = {"listed": _served(store, list(MODELS)), "all": _served(store, None)}
    assert widened["listed"]["bert-embed"].served_requests == pytest.approx(10.0 * 600)
    indexes = _indexes(store)
    assert indexes["ix_observations_model_at_load"] == ["model", "at", "demand_rps",
                                                         "capacity_rps", "arrivals_rps"]
    assert "ix_observations_model_at" not in indexes
    downgrade(store.engine, "0029")  # 0030 added what arrived to it
    assert _indexes(store)["ix_observations_model_at_load"] == ["model", "at", "demand_rps",
                                                                "capacity_rps"]
    assert {"listed": _served(store, list(MODELS)), "all": _served(store, None)} == widened
    downgrade(store.engine, "0024")
    indexes = _indexes(store)
    assert indexes["ix_observations_model_at"] == ["model", "at"]
    assert "ix_observations_model_at_load" not in indexes
    # the same figures whichever index reads them
    assert {"listed": _served(store, list(MODELS)), "all": _served(store, None)} == widened
    upgrade(store.engine)
    assert "ix_observations_model_at_load" in _indexes(store)
