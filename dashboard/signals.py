"""A model's serving signals over time on the Models page (pure: frames in, charts out): the
latency its load source read against the model's latency SLO, the requests queued in its
replicas against a backlog of ``QUEUE_BACKLOG_S`` of its ready capacity, and their KV cache
usage against ``KV_CACHE_FULL``; each drawn only where it was measured (stored observations,
migration 0027 for the queue and KV cache)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import altair as alt
import pandas as pd

from controlplane.domain.slo import KV_CACHE_FULL, QUEUE_BACKLOG_S
from dashboard import widgets

#: as many readings or fewer are also drawn as points
FEW_READINGS = 60
READING, LIMIT = "#222222", "#e45756"


@dataclass(frozen=True, slots=True)
class Signal:
    column: str  # the observations' column
    title: str
    unit: str  # the y axis title
    limit: str  # what the red line is, for the caption


SIGNALS = (
    Signal("latency_ms", "Latency", "ms", "the model's latency SLO"),
    Signal("queued_requests", "Queued requests", "requests",
           f"{QUEUE_BACKLOG_S:.0f} s of its ready capacity"),
    Signal("kv_cache_usage", "KV cache usage", "%", f"{KV_CACHE_FULL:.0%} full"),
)


def measured(history: pd.DataFrame) -> tuple[Signal, ...]:
    """The signals with at least one reading in ``history`` (a model's observations)."""
    return tuple(s for s in SIGNALS if s.column in history and history[s.column].notna().any())


def signal_frame(history: pd.DataFrame, signal: Signal, slo_ms: float | None) -> pd.DataFrame:
    """``at``, the reading (``value``, in the signal's unit) and its ``limit`` at each
    observation that read the signal; the limit is NaN where there is none (a model not
    listed has no SLO)."""
    rows = history[history[signal.column].notna()]
    value = rows[signal.column].astype(float)
    if signal.column == "kv_cache_usage":
        value, limit = 100 * value, pd.Series(100 * KV_CACHE_FULL, index=rows.index)
    elif signal.column == "queued_requests":
        limit = QUEUE_BACKLOG_S * rows["capacity_rps"].astype(float)
    else:
        limit = pd.Series(math.nan if slo_ms is None else float(slo_ms), index=rows.index)
    return pd.DataFrame({"at": rows["at"], "value": value, "limit": limit})


def signal_chart(frame: pd.DataFrame, signal: Signal) -> alt.LayerChart:
    """The readings (line) and the limit (red, dashed) over time; each reading also a point
    when there are few (one reading alone draws no line)."""
    x = widgets.time_x()
    few = len(frame) <= FEW_READINGS
    reading = alt.Chart(frame).mark_line(color=READING, point=_points(READING, few)).encode(
        x=x, y=alt.Y("value:Q", title=signal.unit))
    limit = alt.Chart(frame).mark_line(
        color=LIMIT, strokeDash=[6, 3], point=_points(LIMIT, few)).transform_filter(
        "isValid(datum.limit)").encode(x=x, y="limit:Q")
    chart: alt.LayerChart = (reading + limit).properties(height=180)
    return chart


def _points(color: str, few: bool) -> alt.OverlayMarkDef | bool:
    return alt.OverlayMarkDef(color=color) if few else False


def over_limit(frame: pd.DataFrame, signal: Signal) -> str:
    """How many of the readings were above the limit, in words for the chart's caption."""
    limited = frame[frame["limit"].notna()]
    if limited.empty:
        return f"{len(frame):,} readings; no limit known (red: {signal.limit})."
    over = int((limited["value"] > limited["limit"]).sum())
    return f"{over:,} of {len(limited):,} readings above {signal.limit} (red)."
