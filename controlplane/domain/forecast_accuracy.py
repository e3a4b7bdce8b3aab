"""How each model's forecasts have done lately: a pure value the reconcile tick reports."""

from __future__ import annotations

from dataclasses import dataclass

#: the window each model's recent accuracy is taken over (metrics, ``headroom status``)
ACCURACY_WINDOW_S = 3600.0


@dataclass(frozen=True, slots=True)
class ForecastAccuracy:
    """One model's scored forecast steps in a window: ``wape`` is sum |observed - p50| / sum
    observed (None when nothing was served in them), ``p90_coverage`` the share observed at or
    below p90 (the calibrated tail should hold ~0.9)."""

    model: str
    scored: int
    wape: float | None
    p90_coverage: float
