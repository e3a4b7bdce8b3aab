"""An observation keeps the requests that arrived beside those that finished (migration 0030): a
saturated vLLM finishes what its capacity serves and holds the rest, so demand read from the
store (the history forecasts are calibrated against, traces, the peak KEDA reads, the requests
asked for, shortfalls) is what arrived, while what was served stays what finished. A row whose
growth was not measured (older rows, the simulator) reads as many arrived as finished, and a store
not yet upgraded still reads. On SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlmodel import SQLModel
from tick_builders import T0, sample_tick_report

from controlplane.cost_reader import served_requests, shortfalls
from controlplane.domain.observed import ObservedModel
from controlplane.recorded_timeline import read_recorded
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store, downgrade

OBSERVATIONS = SQLModel.metadata.tables["observations"]
MODEL = DEMO_MODELS[0].name  # listed, so the recorded timeline has its minutes
STEP_S = 60


def _observe(store: Store, minute: int, finished_rps: float, growth_rps: float | None,
             capacity_rps: float = 8.0) -> None:
    """One tick at ``minute`` that read the model finishing ``finished_rps`` while what its
    replicas hold grew by ``growth_rps`` (None: not measured)."""
    report = sample_tick_report()
    at = T0 + timedelta(minutes=minute)
    seen = ObservedModel(MODEL, 2, 0, 2, finished_rps, capacity_rps, queue_growth_rps=growth_rps)
    observed = replace(report.observed, synced_at=at, models=(seen,))
    store.save_tick(replace(report, started_at=at, finished_at=at, observed=observed))
    store.save_observed(observed)


@pytest.fixture
def saturated(store_url: str) -> Store:
    """Minutes 0-5: 8 rps finished of a capacity of 8 while the queue grows by 2 rps (10
    arrive), then 12 rps finished as it drains by 2 rps (still 10), then a minute whose growth
    was not read (8 finished: 8 known to have arrived)."""
    store = Store.open(store_url, migrate=True)
    store.upsert_models(DEMO_MODELS[:1])
    for minute in range(3):
        _observe(store, minute, 8.0, 2.0)
    for minute in range(3, 6):
        _observe(store, minute, 12.0, -2.0, capacity_rps=16.0)
    _observe(store, 6, 8.0, None)
    return store


def test_an_observation_records_what_arrived_and_none_where_the_growth_was_not_read(
        saturated: Store) -> None:
    with saturated.engine.connect() as connection:
        rows = connection.execute(select(OBSERVATIONS.c.demand_rps, OBSERVATIONS.c.arrivals_rps)
                                  .order_by(OBSERVATIONS.c.at)).all()
    assert [tuple(r) for r in rows] == [(8.0, 10.0)] * 3 + [(12.0, 10.0)] * 3 + [(8.0, None)]


def test_the_history_and_the_peak_read_what_arrived_while_the_queue_grows_and_drains(
        saturated: Store) -> None:
    series = saturated.rate_history(MODEL, T0, T0 + timedelta(minutes=7), STEP_S)
    assert series.values == (10.0,) * 6 + (8.0,)
    assert saturated.peak_rps_since(MODEL, T0) == 10.0


def test_the_requests_asked_for_are_those_that_arrived_and_those_served_those_that_finished(
        saturated: Store) -> None:
    [got] = served_requests(saturated.engine, [MODEL], T0, T0 + timedelta(minutes=7)).values()
    # 7 observations a minute apart cover 7 minutes: 6 at 10 rps and 1 at 8 rps arrived; 3 at
    # 8, 3 at 12 and 1 at 8 finished (each within its capacity)
    assert got.observations == 7
    assert got.demand_requests == pytest.approx((6 * 10.0 + 8.0) * 60)
    assert got.served_requests == pytest.approx((3 * 8.0 + 3 * 12.0 + 8.0) * 60)


def test_capacity_below_what_arrived_is_short_though_it_serves_all_that_finishes(
        saturated: Store) -> None:
    read = shortfalls(saturated.engine, T0, T0 + timedelta(minutes=6))
    assert (read[MODEL].observations, read[MODEL].short_observations) == (7, 3)


def test_the_recorded_timeline_scores_the_saturated_minutes_against_what_arrived(
        saturated: Store) -> None:
    rows = read_recorded(saturated.engine, [MODEL], T0, T0 + timedelta(minutes=7))
    assert [r.demand_rps for r in rows] == [10.0] * 6 + [8.0]


def test_a_store_older_than_0030_reads_what_finished_as_what_arrived(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_models(DEMO_MODELS[:1])
    _observe(store, 0, 8.0, 2.0)
    downgrade(store.engine, "0029")
    older = Store.open(store_url)  # as open_existing reads a store not yet upgraded
    assert older.rate_history(MODEL, T0, T0 + timedelta(minutes=1), STEP_S).values == (8.0,)
    assert older.peak_rps_since(MODEL, T0) == 8.0
    [got] = served_requests(older.engine, [MODEL], T0, T0 + timedelta(minutes=1)).values()
    assert got.observations == 1
    assert shortfalls(older.engine, T0, T0)[MODEL].short_observations == 0


def test_what_arrived_is_what_finished_plus_the_growth_of_what_is_held_never_below_zero() -> None:
    seen = ObservedModel(MODEL, 1, 0, 1, 8.0, 8.0)
    assert seen.arrivals_rps == 8.0  # growth not read: what finished
    assert replace(seen, queue_growth_rps=2.5).arrivals_rps == 10.5
    assert replace(seen, queue_growth_rps=-3.0).arrivals_rps == 5.0
    assert replace(seen, queue_growth_rps=-9.0).arrivals_rps == 0.0
