"""Showback of a past day splits cost by the tenant each model had then: the tenant is stored
with the plan's placements, so renaming or removing a model (or moving it to another tenant)
in the models table later does not re-bill its past. Placements stored before tenants were
recorded (no tenant) keep the models table's tenant of today, or "unknown"."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import delete, update
from tick_builders import T0, sample_tick_report

from controlplane import cost_export, cost_reader
from controlplane.domain.cost import CostCategory
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store

BERT = next(s for s in DEMO_MODELS if s.name == "bert-embed")  # tenant globex


def _store_with_two_ticks(store_url: str) -> Store:
    store = Store.open(store_url, migrate=True)
    store.upsert_models([BERT])
    for hour in (0, 1):
        report = sample_tick_report()
        at = T0 + timedelta(hours=hour)
        store.save_tick(replace(report, started_at=at, finished_at=at + timedelta(seconds=1),
                                observed=replace(report.observed, synced_at=at)))
        store.save_observed(replace(report.observed, synced_at=at))
    return store


def _serving(store: Store) -> dict[tuple[str, str], float]:
    result = cost_export.showback(store.engine, cost_reader.price_table(store.engine), T0,
                                  T0 + timedelta(hours=2), step_s=300)
    out: dict[tuple[str, str], float] = {}
    for a in result.accruals:
        if a.category is CostCategory.SERVING:
            out[(a.tenant, a.model)] = out.get((a.tenant, a.model), 0.0) + a.gpu_hours
    return out


def test_a_model_removed_from_the_models_table_keeps_its_past_cost_on_its_tenant_then(
        store_url: str) -> None:
    store = _store_with_two_ticks(store_url)
    before = _serving(store)
    models = cost_reader.table("models")
    with store.engine.begin() as connection:
        connection.execute(delete(models).where(models.c.name == "bert-embed"))
    assert _serving(store) == before
    assert set(before) == {("globex", "bert-embed")}


def test_a_model_moved_to_another_tenant_keeps_its_past_cost_on_the_tenant_it_had_then(
        store_url: str) -> None:
    store = _store_with_two_ticks(store_url)
    models = cost_reader.table("models")
    with store.engine.begin() as connection:
        connection.execute(update(models).where(models.c.name == "bert-embed")
                           .values(tenant="initech"))
    later = T0 + timedelta(hours=1)
    report = sample_tick_report()
    store.save_tick(replace(report, started_at=later + timedelta(minutes=30),
                            finished_at=later + timedelta(minutes=31)))
    split = _serving(store)
    assert set(split) == {("globex", "bert-embed"), ("initech", "bert-embed")}
    assert split[("globex", "bert-embed")] == pytest.approx(1.5)  # 0:00-1:30, one GPU
    assert split[("initech", "bert-embed")] == pytest.approx(0.5)


def test_a_removed_models_requests_still_count_on_its_past_days(store_url: str) -> None:
    store = _store_with_two_ticks(store_url)
    models = cost_reader.table("models")
    with store.engine.begin() as connection:
        connection.execute(delete(models).where(models.c.name == "bert-embed"))
    result = cost_export.showback(store.engine, cost_reader.price_table(store.engine), T0,
                                  T0 + timedelta(hours=2), step_s=300)
    assert result.requests[("2026-03-02", "bert-embed")] > 0


def test_placements_stored_without_a_tenant_take_the_models_tables_tenant_of_today(
        store_url: str) -> None:
    store = _store_with_two_ticks(store_url)
    placements = cost_reader.table("placements")
    with store.engine.begin() as connection:
        connection.execute(update(placements).values(tenant=None))
    assert set(_serving(store)) == {("globex", "bert-embed")}
    models = cost_reader.table("models")
    with store.engine.begin() as connection:
        connection.execute(delete(models).where(models.c.name == "bert-embed"))
    assert set(_serving(store)) == {("unknown", "bert-embed")}


def test_requests_of_every_model_observed_are_read_when_no_models_are_named(
        store_url: str) -> None:
    """The dashboard's served requests (and its CSV) ask so: a model since removed from the
    models table still served on its past days."""
    store = _store_with_two_ticks(store_url)
    models = cost_reader.table("models")
    with store.engine.begin() as connection:
        connection.execute(delete(models).where(models.c.name == "bert-embed"))
    served = cost_reader.served_requests(store.engine, None, T0, T0 + timedelta(hours=2))
    assert set(served) == {"bert-embed"}
    assert served["bert-embed"].served_requests > 0
