"""Demand hints: a model's demand announced ahead (a launch, a campaign, a batch job) that no
forecast of its history can see. A hint is a floor on the model's forecast over its window; it
never lowers a forecast (pure values; applied by ``controlplane.autoscaling.hints``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

MAX_HINT_RPS = 1e7


@dataclass(frozen=True, slots=True)
class DemandHint:
    """``model`` expects at least ``rate_rps`` from ``start_at`` until ``end_at`` (UTC, end
    excluded); ``reason`` is the operator's words; ``hint_id`` is the store's (None: unsaved)."""

    model: str
    rate_rps: float
    start_at: datetime
    end_at: datetime
    reason: str = ""
    hint_id: int | None = None

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ValueError("demand hint: model is empty")
        if not (math.isfinite(self.rate_rps) and 0 <= self.rate_rps <= MAX_HINT_RPS):
            raise ValueError(f"demand hint for {self.model}: rate_rps must be a number in "
                             f"[0, {MAX_HINT_RPS:g}], got {self.rate_rps}")
        if self.start_at.tzinfo is None or self.end_at.tzinfo is None:
            raise ValueError(f"demand hint for {self.model}: start_at and end_at need a "
                             "time zone")
        if self.end_at <= self.start_at:
            raise ValueError(f"demand hint for {self.model}: end_at {self.end_at.isoformat()} "
                             f"is not after start_at {self.start_at.isoformat()}")

    def overlaps(self, since_at: datetime, until_at: datetime) -> bool:
        """Whether the hint's window meets [since_at, until_at)."""
        return self.start_at < until_at and since_at < self.end_at
