"""Profile samples in the store (SQLite and PostgreSQL): each observation keeps its mean latency,
so a restarted loop reads the same samples, and migration 0005 adds and removes the columns
without touching the rows already there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from sqlalchemy import MetaData, Table, event, insert, inspect
from tick_builders import T0, sample_tick_report

from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.domain.profile import ProfileCorrection, ProfileSample
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.tables import ObservationRecord

MISTRAL, BERT = "mistral-7b-support", "bert-embed"


def _observed(at_s: int, mistral_latency_ms: float | None, ready: int = 2) -> ObservedState:
    return ObservedState(T0 + timedelta(seconds=at_s), (), (), (
        ObservedModel(MISTRAL, ready, 0, ready, 30.0, 28.8, latency_ms=mistral_latency_ms),
        ObservedModel(BERT, 1, 0, 1, 100.0, 300.0, demand_measured=False,
                      latency_ms=12.0)))


def _columns(store: Store, table: str) -> set[str]:
    return {c["name"] for c in inspect(store.engine).get_columns(table)}


def test_samples_are_demand_per_ready_replica_and_latency_inside_the_window(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    for at_s, latency_ms in ((0, 640.0), (30, 700.0), (60, 480.0), (90, 520.0)):
        store.save_observed(_observed(at_s, latency_ms))
    got = store.profile_samples(T0, T0 + timedelta(seconds=60))
    assert got == {MISTRAL: (ProfileSample(T0 + timedelta(seconds=30), 15.0, 700.0),
                             ProfileSample(T0 + timedelta(seconds=60), 15.0, 480.0))}


def test_observations_without_latency_or_ready_replicas_are_no_samples(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_observed(_observed(0, None))
    store.save_observed(_observed(30, 600.0, ready=0))
    store.save_observations([(MISTRAL, T0 + timedelta(seconds=45), 30.0)])  # backfilled history
    assert store.profile_samples(T0 - timedelta(hours=1), T0 + timedelta(hours=1)) == {}


def test_migration_0005_adds_the_columns_and_its_downgrade_keeps_older_rows(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    assert "latency_ms" in _columns(store, "observations")
    assert "profiles_json" in _columns(store, "ticks")
    downgrade(store.engine, "0004")
    assert "latency_ms" not in _columns(store, "observations")
    assert "profiles_json" not in _columns(store, "ticks")
    before = Table("observations", MetaData(), autoload_with=store.engine)  # as 0004 has it
    with store.engine.begin() as connection:  # a row written before the upgrade
        connection.execute(insert(before).values(model=MISTRAL, at=T0, demand_rps=30.0,
                                                 capacity_rps=36.0, replicas_ready=2))
    upgrade(store.engine)
    assert store.rate_history(MISTRAL, T0, T0 + timedelta(seconds=60), 60).values == (30.0,)
    assert store.profile_samples(T0 - timedelta(hours=1), T0 + timedelta(hours=1)) == {}


def test_a_ticks_profiles_and_the_corrected_values_in_use_survive_a_restart(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    profiles = (ProfileCorrection(MISTRAL, 18.0, 10.3, 10.3 / 18.0, 31, "over_slo: 12 of 31"),
                ProfileCorrection(BERT, 300.0, 300.0, 1.0, 0, "too_few_samples: 0 of 10"))
    memory = replace(sample_tick_report().guard_memory, profile_rps=((MISTRAL, 10.3),))
    store.save_tick(replace(sample_tick_report(), profiles=profiles, guard_memory=memory))
    store.save_tick(replace(sample_tick_report(), guard_memory=memory))  # a skipped tick's
    reopened = Store.open(store_url)
    assert reopened.last_profiles() == profiles
    assert reopened.last_guard_memory().profile_rps == ((MISTRAL, 10.3),)


def test_migration_0006_renames_the_latency_column_and_keeps_its_values_both_ways(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    downgrade(store.engine, "0005")
    assert "mean_latency_ms" in _columns(store, "observations")
    assert "latency_ms" not in _columns(store, "observations")
    before = Table("observations", MetaData(), autoload_with=store.engine)  # as 0005 has it
    with store.engine.begin() as connection:  # a sample written before the upgrade
        connection.execute(insert(before).values(model=MISTRAL, at=T0, demand_rps=30.0,
                                                 capacity_rps=36.0, replicas_ready=2,
                                                 mean_latency_ms=640.0))
    upgrade(store.engine)
    assert "mean_latency_ms" not in _columns(store, "observations")
    window = (T0 - timedelta(hours=1), T0 + timedelta(hours=1))
    assert store.profile_samples(*window) == {MISTRAL: (ProfileSample(T0, 15.0, 640.0),)}
    downgrade(store.engine, "0005")
    renamed = Table("observations", MetaData(), autoload_with=store.engine)
    with store.engine.connect() as connection:
        assert connection.execute(renamed.select()).one().mean_latency_ms == 640.0


def _query_plan_of_profile_samples(store: Store) -> str:
    """SQLite's plan of the statement ``profile_samples`` runs."""
    seen: list[tuple[str, Sequence[Any]]] = []

    def capture(conn: object, cursor: object, statement: str, parameters: Sequence[Any],
                context: object, executemany: bool) -> None:
        if "FROM observations" in statement:
            seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        store.profile_samples(T0, T0 + timedelta(hours=1))
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    (statement, parameters), = seen
    with store.engine.connect() as connection:
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
    return "\n".join(str(row[-1]) for row in rows)


def test_the_profile_samples_of_a_tick_are_read_through_the_time_index_not_the_whole_table(
        sqlite_url: str) -> None:
    # every tick reads the window of every model's observations: a full scan of a store that
    # keeps 30 days of them made each tick slower as the store filled
    store = Store.open(sqlite_url, migrate=True)
    plan = _query_plan_of_profile_samples(store)
    assert "USING INDEX ix_observations_at" in plan, plan
    assert "SCAN observations" not in plan, plan
    assert "TEMP B-TREE" not in plan, plan  # the index gives the order too


def test_migration_0013_adds_the_observation_time_index_and_its_downgrade_drops_it(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)

    def indexes() -> set[str]:
        return {str(i["name"]) for i in inspect(store.engine).get_indexes("observations")}

    assert "ix_observations_at" in indexes()
    downgrade(store.engine, "0012")
    assert "ix_observations_at" not in indexes()
    assert "ix_observations_model_at" in indexes()
    upgrade(store.engine)
    assert "ix_observations_at" in indexes()


def test_the_profile_samples_are_read_as_columns_without_loading_an_orm_row_each(
        store_url: str) -> None:
    # a tick reads the last hour of every model's observations (24,000 rows at 200 models and
    # a 30 s interval): an ORM object built per row took seconds of every tick
    store = Store.open(store_url, migrate=True)
    for at_s in range(0, 300, 30):
        store.save_observed(_observed(at_s, 600.0))
    loaded: list[object] = []

    def on_load(target: object, context: object) -> None:
        loaded.append(target)

    event.listen(ObservationRecord, "load", on_load)
    try:
        got = store.profile_samples(T0 - timedelta(seconds=1), T0 + timedelta(hours=1))
    finally:
        event.remove(ObservationRecord, "load", on_load)
    assert [s.at for s in got[MISTRAL]] == [T0 + timedelta(seconds=s) for s in range(0, 300, 30)]
    assert loaded == []
