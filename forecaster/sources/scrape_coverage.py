"""Which steps of a Prometheus rate series the scrapes covered only in part (pure).

A step's ``rate(metric[W])`` is read over the window ``W`` before it. Where the window's samples
reach one end only (before the series' first sample, at the edge of a scrape gap, past its newest
sample), Prometheus extrapolates the rate at most half a scrape interval past the samples, so it
reads a fraction of the real rate; ``forecaster.sources.prometheus`` treats those steps as gaps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

#: a window edge farther than this many scrape intervals from a sample is not covered: past it
#: Prometheus' rate extrapolates only half an interval (its own threshold)
EXTRAPOLATION_INTERVALS = 1.1


@dataclass(frozen=True, slots=True)
class PartlyScraped:
    """The steps whose rate window the samples covered only in part, by where they lie."""

    steps: frozenset[int] = frozenset()
    leading: int = 0  # before the first step with a covered window
    trailing: int = 0  # after the last one
    newest_at_s: float = math.nan  # unix time of the newest sample seen

    @property
    def dropped(self) -> int:
        return len(self.steps)

    def describe(self, window_s: int) -> str:
        where = [f"{n} {what}" for n, what in (
            (self.leading, "starting before the first sample"),
            (self.dropped - self.leading - self.trailing, "at the edge of a scrape gap"),
            (self.trailing, "running past the newest sample"
                            + (f" at {datetime.fromtimestamp(self.newest_at_s, UTC).isoformat()}"
                               if math.isfinite(self.newest_at_s) else ""))) if n]
        return (f"{self.dropped} step(s) treated as missing, their {window_s} s rate window only "
                f"partly scraped ({', '.join(where)}): Prometheus' rate of it reads low")


def partly_scraped(values: Sequence[float], counts: Sequence[float], newest: Sequence[float],
                   first_at_s: float, step_s: int, window_s: int) -> PartlyScraped:
    """The steps with a value (``values[i]``, read at ``first_at_s + i * step_s`` over the
    ``window_s`` before) whose window has no sample within ``EXTRAPOLATION_INTERVALS`` scrape
    intervals of its start or of its end. ``counts[i]``: the samples in step i's window (the
    scrape interval is the window over their median); ``newest[k]``: the newest sample time at
    ``first_at_s - window_s + k * gcd(step_s, window_s)`` (NaN: none)."""
    per_window = [c for c in counts if math.isfinite(c) and c >= 2]
    if not per_window:
        return PartlyScraped()
    tolerance_s = EXTRAPOLATION_INTERVALS * window_s / float(np.median(per_window))
    grid_s = math.gcd(step_s, window_s)

    def scraped(k: int) -> bool:
        at_s = first_at_s - window_s + k * grid_s
        return 0 <= k < len(newest) and at_s - newest[k] <= tolerance_s

    valued = [i for i, v in enumerate(values) if not math.isnan(v)]
    partial = [i for i in valued if not (scraped(i * step_s // grid_s)
                                         and scraped((i * step_s + window_s) // grid_s))]
    kept = sorted(set(valued) - set(partial))
    newest_at_s = max((t for t in newest if math.isfinite(t)), default=math.nan)
    return PartlyScraped(
        steps=frozenset(partial),
        leading=sum(1 for i in partial if i < kept[0]) if kept else 0,
        trailing=sum(1 for i in partial if not kept or i > kept[-1]),
        newest_at_s=newest_at_s)
