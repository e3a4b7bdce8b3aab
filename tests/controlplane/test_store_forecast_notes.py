"""A forecast's notes (what was done to its model's history on the way) are stored with it
(SQLite and PostgreSQL): they round-trip through the store, a forecast without notes reads back
with none, migration 0023 adds the column (a forecast stored before reads as having no notes)
and its downgrade drops it, and KEDA's scaler serves a forecast with notes as any other."""

from __future__ import annotations

from sqlalchemy import inspect
from test_keda_hints import BERT, _metric
from tick_builders import T0

from controlplane.sim.clock import VirtualClock
from controlplane.store import Store, downgrade, upgrade
from forecaster.types import Forecast

CLIPPED = "2 negative value(s) clipped to 0"
LAST_CLIPPED = ("1 negative value(s) clipped to 0, the last observation among them (-4 at "
                "2026-03-02T11:59:00+00:00): the forecast starts from a last observation of 0")


def _forecast(model: str, notes: tuple[str, ...] = ()) -> Forecast:
    return Forecast(model, T0, 60, (800.0,) * 20, (900.0,) * 20, "hybrid", notes=notes)


def _columns(store: Store) -> set[str]:
    return {c["name"] for c in inspect(store.engine).get_columns("forecasts")}


def test_a_forecasts_notes_round_trip_and_a_forecast_without_notes_reads_back_with_none(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    noted, plain = _forecast("chat", (CLIPPED, LAST_CLIPPED)), _forecast("support")
    store.save_forecasts([noted, plain], T0)
    assert store.latest_forecasts() == {"chat": noted, "support": plain}
    assert store.latest_forecasts()["chat"].notes == (CLIPPED, LAST_CLIPPED)


def test_the_newest_forecast_of_a_model_brings_its_own_notes_not_an_older_ones(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_forecasts([_forecast("chat", (CLIPPED,))], T0)
    store.save_forecasts([_forecast("chat")], T0)
    assert store.latest_forecasts()["chat"].notes == ()


def test_migration_0023_adds_the_notes_column_and_its_downgrade_drops_it(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    assert "notes_json" in _columns(store)
    downgrade(store.engine, "0022")
    assert "notes_json" not in _columns(store)
    with store.engine.begin() as connection:  # a forecast stored at 0022
        connection.exec_driver_sql(
            "INSERT INTO forecasts (model, computed_at, origin_at, step_s, p50_json, p90_json, "
            "method, fallback_reason) VALUES ('old', '2026-03-02 12:00:00+00:00', "
            "'2026-03-02 12:00:00+00:00', 60, '[1.0]', '[2.0]', 'persistence', '')")
    upgrade(store.engine)
    assert Store.open(store_url).latest_forecasts()["old"].notes == ()


def test_keda_serves_a_stored_forecast_with_notes_as_any_other(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_forecasts([_forecast(BERT, (CLIPPED,))], T0)
    assert _metric(store, VirtualClock(T0)) == 900.0
