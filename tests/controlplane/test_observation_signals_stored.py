"""Each observation keeps the model's queued requests and KV cache usage beside its latency
(migration 0027), so the dashboard draws them over time; a model whose engine does not report
them keeps None (not measured), never 0. On SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import inspect, select
from sqlmodel import SQLModel
from tick_builders import T0, sample_tick_report

from controlplane.domain.observed import ObservedModel
from controlplane.store import Store, downgrade, upgrade

OBSERVATIONS = SQLModel.metadata.tables["observations"]


def _stored(store: Store) -> dict[str, tuple[float | None, float | None, float | None]]:
    with store.engine.connect() as connection:
        return {m: (lat, q, kv) for m, lat, q, kv in connection.execute(select(
            OBSERVATIONS.c.model, OBSERVATIONS.c.latency_ms, OBSERVATIONS.c.queued_requests,
            OBSERVATIONS.c.kv_cache_usage))}


def test_an_observation_keeps_the_queue_and_kv_cache_read_and_none_where_not_read(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    observed = sample_tick_report().observed
    mistral = ObservedModel("mistral-7b", 2, 0, 2, 20.0, 30.0, latency_ms=850.0,
                            queued_requests=6.0, queue_growth_rps=0.5, kv_cache_usage=0.83)
    store.save_observed(replace(observed, models=(*observed.models, mistral)))
    assert _stored(store) == {"bert-embed": (None, None, None),
                              "mistral-7b": (850.0, 6.0, 0.83)}


def test_migration_0027_adds_the_two_columns_empty_and_its_downgrade_drops_them_keeping_rows(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    downgrade(store.engine, "0026")
    with store.engine.begin() as connection:  # a row written before the upgrade
        connection.execute(OBSERVATIONS.insert().values(
            model="bert-embed", at=T0, demand_rps=500.0, capacity_rps=600.0, replicas_ready=2,
            latency_ms=42.0))
    columns = {c["name"] for c in inspect(store.engine).get_columns("observations")}
    assert not {"queued_requests", "kv_cache_usage"} & columns
    upgrade(store.engine, "0027")
    assert _stored(store) == {"bert-embed": (42.0, None, None)}
    downgrade(store.engine, "0026")
    with store.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT model, demand_rps FROM observations").all()
    assert [tuple(r) for r in rows] == [("bert-embed", 500.0)]
