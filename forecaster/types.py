"""Value types of the forecaster (pure; no I/O).

A ``TrafficSeries`` is a regularly stepped request-rate series (NaN marks a missing point, never
zero); a ``Forecast`` is what every forecaster returns for one series: p50 and p90 per future step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True, slots=True)
class TrafficSeries:
    """Request rate of one series at a fixed step: ``values[i]`` is at ``start_at + i*step``."""

    series_id: str
    step_s: int
    start_at: datetime
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.step_s <= 0:
            raise ValueError(f"series {self.series_id!r}: step_s must be > 0, got {self.step_s}")
        if self.start_at.tzinfo is None:
            raise ValueError(f"series {self.series_id!r}: start_at must be timezone-aware (UTC)")

    @property
    def end_at(self) -> datetime:
        """Time of the first point *after* the last observation (the forecast origin)."""
        return self.start_at + timedelta(seconds=self.step_s * len(self.values))

    def observed_count(self) -> int:
        return sum(1 for v in self.values if not math.isnan(v))

    def last_observed(self) -> float | None:
        for v in reversed(self.values):
            if not math.isnan(v):
                return v
        return None


@dataclass(frozen=True, slots=True)
class SourcedSeries:
    """A series as a history source read it, with what the source cleaned or noticed on the way
    (one line each, e.g. ``3 negative value(s) clipped to 0``; empty when nothing)."""

    series: TrafficSeries
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Forecast:
    """Forecast from ``origin_at`` on: ``p50[i]``/``p90[i]`` at ``origin_at + i*step``.

    ``method`` is the method actually used (a baseline when the model was replaced),
    ``fallback_reason`` says why (empty when it was not), ``backtest_wape`` is that method's
    WAPE in percent on the most recent held-out pairs (None when there were too few).
    ``notes`` say what was done to the input on the way, one line each, without a fallback
    (e.g. ``2 negative value(s) clipped to 0, the last observation among them (-4 at ...): the
    forecast starts from a last observation of 0``); empty when nothing was.
    """

    series_id: str
    origin_at: datetime
    step_s: int
    p50: tuple[float, ...]
    p90: tuple[float, ...]
    method: str
    fallback_reason: str = ""
    backtest_wape: float | None = None
    diagnostics: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.p50) != len(self.p90):
            raise ValueError(f"series {self.series_id!r}: p50 and p90 lengths differ")

    def p90_max(self) -> float:
        return max(self.p90, default=0.0)
