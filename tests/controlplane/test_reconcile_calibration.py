"""The reconcile loop calibrates its forecasts' upper tails from their own errors, as the
simulator does, from records in the store: a restart rebuilds them, a re-run tick counts
each error once, and KEDA's scaler serves the same calibrated tails."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controlplane.adapters.keda import KedaScalerServicer
from controlplane.adapters.keda_query import ScalerQuery
from controlplane.autoscaling.calibration import MIN_ERRORS
from controlplane.autoscaling.core import TickDecision
from controlplane.autoscaling.issued import errors_from
from controlplane.domain.demand import ratio_key
from controlplane.forecast_calibration import CalibratedForecasts, calibrated_latest
from controlplane.ports import ForecastReader
from controlplane.reconcile import decide
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.ledger import SqlForecastLedger
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
MODEL = "llama-3-70b"  # whole H100s, the only model on the H100 pool


class Forecasts:
    """One forecast of MODEL per minute, flat at ``fraction`` x the load seen now."""

    def __init__(self, runtime: SimRuntime, fraction: float) -> None:
        self.runtime, self.fraction = runtime, fraction

    def latest_forecasts(self) -> Mapping[str, Forecast]:
        seen = self.runtime.cluster.snapshot().model(MODEL)
        assert seen is not None
        origin_at = self.runtime.clock.now().replace(second=0, microsecond=0)
        level = seen.demand_rps * self.fraction
        return {MODEL: Forecast(MODEL, origin_at, 60, (level,) * 20, (level * 1.05,) * 20, "t")}


def _runtime(url: str) -> SimRuntime:
    settings = load_settings(db={"url": url}, sim={"history_s": 6 * 3600})
    return SimRuntime.open(settings, Store.open(url, migrate=True), T0)


def _undershot(runtime: SimRuntime, minutes: int = MIN_ERRORS + 4,
               forecasts: Forecasts | None = None) -> SimRuntime:
    """``minutes`` of ticks on ``forecasts`` (default: a third of the load that came)."""
    runtime.deps = replace(runtime.deps, forecasts=forecasts or Forecasts(runtime, 1 / 3))
    for _ in range(2 * minutes):
        runtime.advance(30, run_jobs=False)
        runtime.tick()
    return runtime


def _next_decision(runtime: SimRuntime, ledger: SqlForecastLedger | None = None) -> TickDecision:
    """What the next tick decides on a forecast that is right now (with ``ledger``'s records)."""
    deps = replace(runtime.deps, forecasts=Forecasts(runtime, fraction=1.0),
                   ledger=ledger or runtime.deps.ledger)
    return decide(deps, runtime.config, runtime.cluster.snapshot(), runtime.clock.now())


def _warm_gpus(decision: TickDecision) -> int:
    return sum(w.gpus for w in decision.placement.warm_pools if w.product == "H100-80GB")


def _hot(decision: TickDecision) -> int:
    return next(r.hot for r in decision.requests if r.model == MODEL)


def _empty_ledger(tmp_path: Path) -> SqlForecastLedger:
    return SqlForecastLedger(Store.open(f"sqlite:///{tmp_path / 'empty.db'}",
                                        migrate=True).engine)


def _scored_of(runtime: SimRuntime) -> int:
    ledger = SqlForecastLedger(runtime.store.engine)
    return len(errors_from([r for r in ledger.issued_since(T0) if r.model == MODEL],
                           runtime.config.calibration.max_errors).scaled_errors)


def test_a_model_whose_forecasts_kept_undershooting_gets_more_hot_replicas_on_the_next_tick(
        tmp_path: Path) -> None:
    runtime = _undershot(_runtime(f"sqlite:///{tmp_path / 'a.db'}"))
    assert _scored_of(runtime) >= MIN_ERRORS
    calibrated = _next_decision(runtime)
    forgetful = _next_decision(runtime, _empty_ledger(tmp_path))  # same fleet, no errors
    demand = next(d for d in calibrated.demands if d.model == MODEL)
    assert demand.reason in ("forecast_upper_quantile", "hot_headroom")  # both calibrated
    assert demand.forecast_upper_rps > 2.5 * demand.observed_rps
    assert _hot(calibrated) > 2 * _hot(forgetful)


def test_a_model_whose_forecasts_were_right_gets_no_more_than_without_calibration(
        tmp_path: Path) -> None:
    runtime = _runtime(f"sqlite:///{tmp_path / 'a.db'}")
    _undershot(runtime, forecasts=Forecasts(runtime, fraction=1.0))
    assert _scored_of(runtime) >= MIN_ERRORS
    calibrated = _next_decision(runtime)
    forgetful = _next_decision(runtime, _empty_ledger(tmp_path))
    assert _hot(calibrated) <= _hot(forgetful)
    assert _warm_gpus(calibrated) <= _warm_gpus(forgetful)


def test_each_tick_reports_how_each_models_forecasts_did_over_the_last_hour(
        tmp_path: Path) -> None:
    undershot = _undershot(_runtime(f"sqlite:///{tmp_path / 'a.db'}"))
    right = _runtime(f"sqlite:///{tmp_path / 'b.db'}")
    _undershot(right, forecasts=Forecasts(right, fraction=1.0))
    low = next(a for a in _next_decision(undershot).accuracy if a.model == MODEL)
    good = next(a for a in _next_decision(right).accuracy if a.model == MODEL)
    assert low.scored >= MIN_ERRORS and good.scored >= MIN_ERRORS
    assert low.wape is not None and 0.6 < low.wape < 0.72  # a third of the load: 2/3 missed
    assert low.p90_coverage == 0.0
    assert good.wape is not None and good.wape < 0.1
    assert good.p90_coverage > 0.5


class _WithARemovedModel:
    """The store's records, and each again as a model the models table no longer lists."""

    def __init__(self, ledger: SqlForecastLedger) -> None:
        self.ledger = ledger

    def issued_since(self, since_at: datetime) -> list[Any]:
        records = list(self.ledger.issued_since(since_at))
        return [*records, *(replace(r, model="removed-model") for r in records)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ledger, name)


def test_a_model_no_longer_listed_gets_no_forecast_accuracy_though_its_records_stay(
        tmp_path: Path) -> None:
    runtime = _undershot(_runtime(f"sqlite:///{tmp_path / 'a.db'}"))
    decision = _next_decision(runtime, _WithARemovedModel(SqlForecastLedger(
        runtime.store.engine)))  # type: ignore[arg-type]
    listed = {m.name for m in runtime.config.specs}
    assert MODEL in {a.model for a in decision.accuracy}
    assert {a.model for a in decision.accuracy} <= listed


def test_calibration_survives_a_restart_rebuilt_from_the_store(store_url: str,
                                                               tmp_path: Path) -> None:
    stopped = _undershot(_runtime(store_url))
    now = stopped.clock.now()
    forecasts = Forecasts(stopped, fraction=1.0).latest_forecasts()
    before = calibrated_latest(forecasts, stopped.deps.ledger, stopped.deps.history,
                               stopped.config.calibration, now)[MODEL]
    assert ratio_key(0.99) in before.diagnostics

    restarted = SimRuntime.open(stopped.settings, Store.open(store_url, migrate=True), T0)
    assert restarted.clock.now() > now  # resumed after its last tick, nothing kept in memory
    after = calibrated_latest(forecasts, restarted.deps.ledger, restarted.deps.history,
                              restarted.config.calibration, now)[MODEL]
    assert after == before
    assert _hot(_next_decision(restarted)) > 2 * _hot(_next_decision(restarted,
                                                                    _empty_ledger(tmp_path)))


def test_a_re_run_tick_records_each_error_once(store_url: str) -> None:
    runtime = _undershot(_runtime(store_url), minutes=10)
    ledger = SqlForecastLedger(runtime.store.engine)
    runtime.advance(60, run_jobs=False)
    runtime.tick()
    once = ledger.issued_since(T0)
    errors = _scored_of(runtime)
    runtime.tick()  # the same tick again: same clock, same snapshot, same forecast
    assert ledger.issued_since(T0) == once
    assert _scored_of(runtime) == errors
    runtime.advance(60, run_jobs=False)
    runtime.tick()
    runtime.tick()
    assert len(ledger.issued_since(T0)) == len(once) + 1
    assert _scored_of(runtime) == errors + 1


def test_records_older_than_the_calibration_window_are_pruned(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    settings = load_settings(db={"url": url}, sim={"history_s": 6 * 3600},
                             forecast={"interval_s": 60},
                             autoscaling={"calibration_window_s": MIN_ERRORS * 60})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), T0)
    _undershot(runtime, minutes=MIN_ERRORS + 10)
    kept = SqlForecastLedger(runtime.store.engine).issued_since(T0)
    oldest_at = runtime.clock.now() - timedelta(seconds=MIN_ERRORS * 60)
    assert kept and min(r.target_at for r in kept) >= oldest_at
    assert len(kept) <= MIN_ERRORS + 1


def _keda_rps(forecasts: ForecastReader, runtime: SimRuntime, quantile: float) -> float:
    query = ScalerQuery(MODEL, target_rps=1.0, lookahead_s=600, quantile=quantile,
                        metric_name="headroom-llama", activation_rps=1 / 600)
    return KedaScalerServicer(forecasts, runtime.clock).forecast_rps(query)


def test_keda_serves_the_upper_tail_the_loop_calibrated_from_its_errors(tmp_path: Path) -> None:
    runtime = _undershot(_runtime(f"sqlite:///{tmp_path / 'a.db'}"))
    raw = runtime.deps.forecasts  # a third of the load that came, every minute
    calibrated = CalibratedForecasts(raw, SqlForecastLedger(runtime.store.engine), runtime.clock,
                                     runtime.config.calibration)
    for quantile in (0.9, 0.99):
        assert _keda_rps(calibrated, runtime, quantile) > 2 * _keda_rps(raw, runtime, quantile)


def test_keda_serves_a_forecast_the_loop_has_not_recorded_as_it_is(tmp_path: Path) -> None:
    runtime = _undershot(_runtime(f"sqlite:///{tmp_path / 'a.db'}"), minutes=5)
    raw = runtime.deps.forecasts
    calibrated = CalibratedForecasts(raw, _empty_ledger(tmp_path), runtime.clock,
                                     runtime.config.calibration)
    assert calibrated.latest_forecasts() == dict(raw.latest_forecasts())
    assert _keda_rps(calibrated, runtime, 0.9) == _keda_rps(raw, runtime, 0.9)


def test_keda_calibrates_again_only_when_the_forecasts_or_the_records_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from controlplane.autoscaling.issued import calibrated_forecasts as real

    runtime = _undershot(_runtime(f"sqlite:///{tmp_path / 'a.db'}"))
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> dict[str, Forecast]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr("controlplane.forecast_calibration.calibrated_forecasts", counted)
    calibrated = CalibratedForecasts(runtime.deps.forecasts, SqlForecastLedger(
        runtime.store.engine), runtime.clock, runtime.config.calibration)
    first = calibrated.latest_forecasts()
    assert [calibrated.latest_forecasts() for _ in range(5)] == [first] * 5
    assert len(calls) == 1  # KEDA's polls between two ticks: one calibration
    runtime.advance(30, run_jobs=False)
    runtime.tick()  # records and scores: the window changed
    calls.clear()  # the tick calibrates too
    after = calibrated.latest_forecasts()
    assert len(calls) == 1
    fresh = CalibratedForecasts(runtime.deps.forecasts, SqlForecastLedger(runtime.store.engine),
                                runtime.clock, runtime.config.calibration)
    assert after == fresh.latest_forecasts()  # the same as calibrating from scratch
