"""The forecasts the reconcile loop sizes from, for readers outside the tick: the calibrated
forecasts floored by the demand hints in force (``controlplane.autoscaling.hints``). KEDA's
external scaler serves these, so a ScaledObject scales for announced demand as the loop does."""

from __future__ import annotations

from controlplane.autoscaling.hints import with_hints
from controlplane.ports import Clock, DemandHints, ForecastReader
from forecaster.types import Forecast


class HintedForecasts:
    """A ForecastReader: ``forecasts`` with the floors of the hints not ended by the clock's
    now, each from ``lead_s`` before its start."""

    def __init__(self, forecasts: ForecastReader, hints: DemandHints, clock: Clock,
                 lead_s: float) -> None:
        self._forecasts = forecasts
        self._hints = hints
        self._clock = clock
        self._lead_s = lead_s

    def latest_forecasts(self) -> dict[str, Forecast]:
        now = self._clock.now()
        return with_hints(self._forecasts.latest_forecasts(), self._hints.active_hints(now), now,
                          self._lead_s)
