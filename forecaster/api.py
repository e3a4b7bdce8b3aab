"""The forecaster's entry point for the control plane: one call, one ``Forecast``.

The foundation ships persistence only; the forecaster issue replaces the internals (Prophet,
ensembles, fallbacks) behind this same signature.
"""

from __future__ import annotations

from forecaster.types import Forecast, TrafficSeries


def forecast(series: TrafficSeries, horizon_s: int, method: str = "auto") -> Forecast:
    """Forecast ``series`` for ``horizon_s`` after its last point (persistence: next = last)."""
    steps = max(1, horizon_s // series.step_s)
    last = series.last_observed()
    level = 0.0 if last is None else max(0.0, last)
    reason = "no_observations" if last is None else ""
    return Forecast(
        series_id=series.series_id,
        origin_at=series.end_at,
        step_s=series.step_s,
        p50=(level,) * steps,
        p90=(level * 1.2,) * steps,
        method="persistence",
        fallback_reason=reason,
    )
