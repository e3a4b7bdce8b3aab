"""The Overview's short % counts a model's observations short of its SLO as its status reads
it: ready capacity below demand, more than 30 s of that capacity queued, a KV cache over 95 %
full, or a latency above the models table's SLO; a signal not measured is not short, nor the
latency of a model not listed (it has no SLO), and a queue or KV cache does not count in a store
older than the columns that keep them (migration 0027). Backfilled history before the first
tick (demand with no capacity) is not counted. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlmodel import SQLModel
from tick_builders import T0, sample_tick_report

from controlplane.cost_reader import shortfalls
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store, downgrade

OBSERVATIONS = SQLModel.metadata.tables["observations"]
LISTED = DEMO_MODELS[0]


def _observe(store: Store, model: str, rows: list[dict[str, Any]]) -> None:
    """``rows`` a minute apart from T0 at 10 rps of ready capacity (overridden per row)."""
    with store.engine.begin() as connection:
        for i, row in enumerate(rows):
            connection.execute(OBSERVATIONS.insert().values(
                model=model, at=T0 + timedelta(minutes=i),
                **{"demand_rps": 5.0, "capacity_rps": 10.0, "replicas_ready": 1, **row}))


def _seeded(store: Store) -> None:
    store.save_tick(sample_tick_report())  # the first tick, at T0
    _observe(store, "mistral-7b", [{}, {"demand_rps": 11.0}, {"queued_requests": 301.0},
                                   {"queued_requests": 300.0}, {"kv_cache_usage": 0.951},
                                   {"kv_cache_usage": 0.95}, {"queued_requests": None}])
    _observe(store, "bert-embed", [{}, {}])
    with store.engine.begin() as connection:  # backfilled before the first tick: not counted
        connection.execute(OBSERVATIONS.insert().values(
            model="bert-embed", at=T0 - timedelta(minutes=5), demand_rps=50.0, capacity_rps=0.0,
            replicas_ready=0))


def _counts(store: Store) -> dict[str, tuple[int, int]]:
    read = shortfalls(store.engine, T0 - timedelta(hours=1), T0 + timedelta(minutes=6))
    return {m: (s.observations, s.short_observations) for m, s in read.items()}


def test_capacity_below_demand_a_queue_over_30_s_and_a_kv_cache_over_95_percent_are_short(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    _seeded(store)
    assert _counts(store) == {"mistral-7b": (7, 3), "bert-embed": (2, 0)}


def test_a_store_older_than_the_queue_and_kv_cache_columns_counts_capacity_alone(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_tick(sample_tick_report())  # written at head: a downgrade keeps the tick
    downgrade(store.engine, "0026")
    _observe(store, "mistral-7b", [{}, {"demand_rps": 11.0}, {}])
    assert _counts(store) == {"mistral-7b": (3, 1)}


def test_a_latency_above_the_listed_models_slo_is_short_and_an_unlisted_models_is_not(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_models([LISTED])
    store.save_tick(sample_tick_report())
    slo_ms = LISTED.latency_slo_ms
    _observe(store, LISTED.name, [{"latency_ms": slo_ms + 0.5}, {"latency_ms": slo_ms},
                                  {"latency_ms": None}, {"latency_ms": slo_ms - 1.0}])
    _observe(store, "unlisted-model", [{"latency_ms": 10 * slo_ms}])
    assert _counts(store) == {LISTED.name: (4, 1), "unlisted-model": (1, 0)}
