"""`headroom status` shows what sizes a hinted model: a demand hint above the forecast step shown
puts its floor in the p50/p90 cells, marked ``*``, with a line naming the forecaster's own values;
the JSON keeps the forecaster's p50/p90 and adds ``hint_floor_rps`` (null without a raise)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from clihelpers import headroom_status, status_json

from controlplane.autoscaling.hints import status_floors
from controlplane.cli.status_view import hint_floor_line
from controlplane.domain.fleet_status import FleetStatus, ForecastPoint, ModelStatus, TickSummary
from controlplane.domain.hints import DemandHint
from controlplane.domain.lease import LeaseRecord
from controlplane.domain.pause import ModelPause
from controlplane.fleet_lease import FLEET_LEASE
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.hints import SqlDemandHints
from controlplane.store.lease import SqlLeaseStore
from controlplane.store.pauses import SqlModelPauses
from controlplane.store.status_reader import read_fleet_status

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
# the step shown: [AT + 15 min, AT + 20 min), of a forecast issued at AT
POINT = ForecastPoint("hybrid", "", AT, AT, AT + 15 * MINUTE, 1200, 140.0, 150.0)


def _status(*hints: DemandHint, point: ForecastPoint | None = POINT) -> FleetStatus:
    tick = TickSummary(7, AT, AT, "applied", "", 8, 140.0, 160.0, True, (), 7)
    model = ModelStatus("chat", "", True, True, 140.0, 4, 0, 4, 160.0, point)
    other = ModelStatus("embed", "", True, True, 10.0, 1, 0, 1, 20.0, point)
    return FleetStatus("store", tick, 7, AT, None, (model, other), (), None, (), hints=hints)


def _hint(rate_rps: float, start_at: datetime, end_at: datetime, model: str = "chat"
          ) -> DemandHint:
    return DemandHint(model, rate_rps, start_at, end_at, "launch")


def _floors(status: FleetStatus, lead_s: float = 0.0) -> dict[str, float | None]:
    return {m.name: m.hint_floor_rps for m in status_floors(status, lead_s).models}


def test_a_hint_over_the_step_shown_and_above_its_forecast_is_the_models_floor() -> None:
    hint = _hint(600.0, AT + 10 * MINUTE, AT + 3 * 60 * MINUTE)
    assert _floors(_status(hint)) == {"chat": 600.0, "embed": None}


def test_a_hint_between_the_forecasts_p50_and_p90_raises_it_and_one_below_both_does_not() -> None:
    window = (AT, AT + 60 * MINUTE)
    assert _floors(_status(_hint(145.0, *window)))["chat"] == 145.0  # above p50 140
    assert _floors(_status(_hint(100.0, *window)))["chat"] is None


def test_a_hint_that_starts_after_the_step_counts_only_within_the_lead() -> None:
    hint = _hint(600.0, AT + 25 * MINUTE, AT + 60 * MINUTE)  # 5 min after the step shown
    assert _floors(_status(hint), lead_s=0.0)["chat"] is None
    assert _floors(_status(hint), lead_s=600.0)["chat"] == 600.0


def test_a_hint_ended_by_the_last_tick_or_a_model_without_a_forecast_has_no_floor() -> None:
    ended = _hint(600.0, AT - 60 * MINUTE, AT)
    assert _floors(_status(ended))["chat"] is None
    assert _floors(_status(_hint(600.0, AT, AT + 60 * MINUTE), point=None))["chat"] is None


def test_a_first_step_shown_that_starts_after_the_tick_counts_a_hint_ending_before_it() -> None:
    # a 30-minute step issued 5 minutes ahead of the tick: the loop reads it from the tick on
    ahead = ForecastPoint("hybrid", "", AT, AT + 5 * MINUTE, AT + 5 * MINUTE, 1800, 140.0, 150.0)
    hint = _hint(600.0, AT - 60 * MINUTE, AT + 5 * MINUTE)
    assert _floors(_status(hint, point=ahead))["chat"] == 600.0  # before: None
    assert _floors(_status(hint))["chat"] is None  # a step shown later: not met


def test_status_shows_the_hints_floor_in_the_forecast_cells_and_the_forecasters_values_beside(
        sqlite_url: str) -> None:
    runtime = SimRuntime.open(load_settings(db={"url": sqlite_url}, sim={"history_s": 3600}),
                              Store.open(sqlite_url, migrate=True), AT)
    runtime.advance(600)
    # a demo's store (its lease): status reads the hints by its simulated clock, not the wall's
    SqlLeaseStore(runtime.store.engine).create_lease(
        FLEET_LEASE, LeaseRecord("demo", 15, AT, AT, 0, "1"))
    status = read_fleet_status(runtime.store.engine, "store", FLEET_LEASE)
    model = next(m for m in status.models if m.forecast is not None)
    assert model.forecast is not None
    rate_rps = round(10 * max(model.forecast.p50_rps, model.forecast.p90_rps) + 100.0, 1)
    tick_at = status.last_tick.started_at if status.last_tick is not None else AT
    SqlDemandHints(runtime.store.engine).add_hint(
        _hint(rate_rps, tick_at, tick_at + 6 * 60 * MINUTE, model.name),
        tick_at)
    doc = status_json(sqlite_url)
    shown = {m["name"]: m for m in doc["models"]}
    assert shown[model.name]["hint_floor_rps"] == rate_rps
    assert shown[model.name]["forecast"]["p90_rps"] == model.forecast.p90_rps  # as forecast
    assert all(m["hint_floor_rps"] is None for name, m in shown.items() if name != model.name)
    words = headroom_status(sqlite_url).stdout
    row = next(line for line in words.splitlines() if line.split("│")[0].strip() == model.name)
    raised_p90 = max(model.forecast.p90_rps * rate_rps / model.forecast.p50_rps, rate_rps)
    assert row.count(f"{rate_rps:,.1f}*") == 1  # p50 raised to the floor
    assert f"{raised_p90:,.1f}*" in row  # p90 with it: the forecast's spread on top
    assert (f"{model.name}: * a demand hint floors the forecast at {rate_rps:g} rps"
            in " ".join(words.split()))


def test_the_hint_line_of_a_paused_model_says_the_pause_overrides_the_floor() -> None:
    pause = ModelPause("chat", 3, AT, "ops")
    assert hint_floor_line("chat", POINT, 600.0).endswith(
        "; the loop sizes from the floor (headroom hint list)")
    assert hint_floor_line("chat", POINT, 600.0, pause) == (
        "chat: * a demand hint floors the forecast at 600 rps (the forecaster's p50 140.0, p90 "
        "150.0); the pause overrides it: the model stays at 3 replica(s) until `headroom models "
        "resume chat` (headroom hint list)")


def test_status_says_a_paused_models_pause_overrides_its_hints_floor(sqlite_url: str) -> None:
    runtime = SimRuntime.open(load_settings(db={"url": sqlite_url}, sim={"history_s": 3600}),
                              Store.open(sqlite_url, migrate=True), AT)
    runtime.advance(120)
    SqlLeaseStore(runtime.store.engine).create_lease(
        FLEET_LEASE, LeaseRecord("demo", 15, AT, AT, 0, "1"))
    status = read_fleet_status(runtime.store.engine, "store", FLEET_LEASE)
    model = next(m for m in status.models if m.forecast is not None)
    assert model.forecast is not None and status.last_tick is not None
    tick_at = status.last_tick.started_at
    rate_rps = round(10 * max(model.forecast.p50_rps, model.forecast.p90_rps) + 100.0, 1)
    SqlDemandHints(runtime.store.engine).add_hint(
        _hint(rate_rps, tick_at, tick_at + 6 * 60 * MINUTE, model.name), tick_at)
    assert SqlModelPauses(runtime.store.engine).pause(model.name, 2, tick_at, "ops")
    words = " ".join(headroom_status(sqlite_url).stdout.split())
    assert (f"{model.name}: * a demand hint floors the forecast at {rate_rps:g} rps" in words)
    assert (f"; the pause overrides it: the model stays at 2 replica(s) until `headroom models "
            f"resume {model.name}` (headroom hint list)") in words  # before: "the loop sizes
    # from the floor", under the line saying the model is held
