"""The reconcile loop's forecast calibration: the shell around ``autoscaling.issued``.

Each tick, before sizing, with ``now`` passed in:

    prune records older than the window -> score the due ones from the observed history
      -> record the first step of each new forecast, with the series' volatility at its origin
      -> calibrate the latest forecasts from the stored records (pure)

Everything lives in the store (``ForecastLedger``), nothing in memory, so a restarted process
calibrates as the stopped one did, and a tick that runs twice changes nothing the second time.
The history is the one the forecast job fits on (the store's observations).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from controlplane.autoscaling.calibration import VOLATILITY_STEPS, recent_volatility
from controlplane.autoscaling.issued import (
    IssuedForecast,
    calibrated_forecasts,
    issued,
    unrecorded,
)
from controlplane.ports import Clock, ForecastLedger, ForecastReader, RateHistory
from forecaster.types import Forecast


@dataclass(frozen=True, slots=True)
class CalibrationConfig:
    window_s: float  # records older than this are pruned (settings.autoscaling)
    max_errors: int  # newest errors kept (ForecastErrors.max_size)


def observed_mean_rps(history: RateHistory, record: IssuedForecast) -> float | None:
    """Mean observed rate over the record's step; None when nothing was observed."""
    series = history.rate_history(record.model, record.target_at, record.end_at, record.step_s)
    values = [v for v in series.values if math.isfinite(v)]
    return sum(values) / len(values) if values else None


def volatility_at(history: RateHistory, forecast: Forecast) -> float:
    """``recent_volatility`` of the series the forecast was made from, up to its origin."""
    since_at = forecast.origin_at - timedelta(seconds=forecast.step_s * (VOLATILITY_STEPS + 1))
    return recent_volatility(history.rate_history(forecast.series_id, since_at,
                                                  forecast.origin_at, forecast.step_s))


def calibrated_latest(forecasts: Mapping[str, Forecast], ledger: ForecastLedger,
                      history: RateHistory, config: CalibrationConfig,
                      now: datetime) -> dict[str, Forecast]:
    """Score, record and prune the ledger; the latest forecasts with calibrated upper tails."""
    since_at = now - timedelta(seconds=config.window_s)
    ledger.prune_issued(since_at)
    records = ledger.issued_since(since_at)
    scored = tuple(r.scored(observed_mean_rps(history, r), now) for r in records if r.is_due(now))
    new = tuple(r for r in (issued(f, volatility_at(history, f))
                            for f in unrecorded(forecasts, records, since_at)) if r is not None)
    if scored or new:  # the store decides what is kept (each record and each score once)
        ledger.record_scored(scored)
        ledger.record_issued(new)
        records = ledger.issued_since(since_at)
    return calibrated_forecasts(forecasts, records, config.max_errors)


class CalibratedForecasts:
    """A ForecastReader whose forecasts carry the upper tails the reconcile loop calibrated from
    its own errors: what KEDA's external scaler serves, so a ScaledObject scales on the same
    tails as the loop. Read-only (the reconcile tick records, scores and prunes the ledger); a
    forecast the loop has not recorded yet is returned as it is. Safe to call from several
    threads (the ledger's cached copy is read under a lock)."""

    def __init__(self, forecasts: ForecastReader, ledger: ForecastLedger, clock: Clock,
                 config: CalibrationConfig) -> None:
        self._forecasts = forecasts
        self._ledger = ledger
        self._clock = clock
        self._config = config
        self._lock = threading.Lock()
        self._memo: tuple[object, dict[str, Forecast]] | None = None

    def latest_forecasts(self) -> dict[str, Forecast]:
        """Calibrated again only when the forecasts or the records changed: KEDA asks for
        every ScaledObject every polling interval (and each stream every few seconds), and
        calibrating walks every record of the window (~4,000 per model over 14 days), while
        the records change once a tick."""
        since_at = self._clock.now() - timedelta(seconds=self._config.window_s)
        forecasts = dict(self._forecasts.latest_forecasts())
        with self._lock:
            records = self._ledger.issued_since(since_at)
            key = (forecasts, _signature(records))
            if self._memo is not None and self._memo[0] == key:
                return dict(self._memo[1])
        calibrated = calibrated_forecasts(forecasts, records, self._config.max_errors)
        with self._lock:
            self._memo = (key, calibrated)
        return dict(calibrated)


def _signature(records: tuple[IssuedForecast, ...]) -> tuple[object, ...]:
    """What tells two windows of records apart, as the ledger changes them: records are only
    inserted, scored once (in place) or pruned from the oldest, so their number, the first and
    the last (in target order) and the number scored say whether any of that happened."""
    if not records:
        return (0,)
    return (len(records), records[0], records[-1],
            sum(1 for r in records if r.scored_at is not None))
