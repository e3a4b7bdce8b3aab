"""Stretches of a cost window with no plan recorded (the control plane was down, or its ticks
failed): the cost model holds the plan before through them, as it holds every sample until the
next, so the bill there is an estimate, not a measure. Named so that the operator sees them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

#: a stretch without a plan longer than this, or than ``TICKS_MISSED`` reconcile intervals, is
#: unrecorded (shorter ones are the ordinary spacing of ticks)
UNRECORDED_AFTER_S = 600.0
TICKS_MISSED = 10
#: the spans a message names one by one; more are counted
NAMED_SPANS = 5

Span = tuple[datetime, datetime]


def gap_limit_s(reconcile_interval_s: float) -> float:
    """How long without a plan makes a stretch unrecorded, for ticks ``reconcile_interval_s``
    apart."""
    return max(UNRECORDED_AFTER_S, TICKS_MISSED * reconcile_interval_s)


def unrecorded_spans(plan_times: Iterable[datetime], since_at: datetime, until_at: datetime,
                     limit_s: float) -> tuple[Span, ...]:
    """Within [since_at, until_at): each stretch longer than ``limit_s`` between one plan and the
    next (or the window's end), clipped to the window. ``plan_times`` may include the plan in
    force at ``since_at`` (the last one before it). No plan at all: none (nothing is held, the
    window has no cost)."""
    ordered = sorted(plan_times)
    if not ordered:
        return ()
    spans = []
    for start_at, end_at in zip(ordered, [*ordered[1:], until_at], strict=True):
        if (end_at - start_at).total_seconds() > limit_s:
            clipped = (max(start_at, since_at), min(end_at, until_at))
            if clipped[0] < clipped[1]:
                spans.append(clipped)
    return tuple(spans)


def hours_per_day(spans: Sequence[Span]) -> dict[str, float]:
    """Unrecorded hours per UTC day (ISO date), the spans split at midnight."""
    hours: dict[str, float] = {}
    for start_at, end_at in spans:
        cursor = start_at
        while cursor < end_at:
            midnight = (cursor + timedelta(days=1)).replace(hour=0, minute=0, second=0,
                                                            microsecond=0)
            piece_end = min(end_at, midnight)
            day = cursor.date().isoformat()
            hours[day] = hours.get(day, 0.0) + (piece_end - cursor) / timedelta(hours=1)
            cursor = piece_end
    return hours


def spans_text(spans: Sequence[Span]) -> str:
    """``from 2026-03-02 22:29:30 to 2026-03-05 22:30:00 UTC (72.0 h)``, joined by ``; ``; past
    ``NAMED_SPANS``, the rest counted with their hours."""
    named = [f"from {s:%Y-%m-%d %H:%M:%S} to {e:%Y-%m-%d %H:%M:%S} UTC "
             f"({(e - s) / timedelta(hours=1):.1f} h)" for s, e in spans[:NAMED_SPANS]]
    rest = spans[NAMED_SPANS:]
    if rest:
        rest_h = sum((e - s) / timedelta(hours=1) for s, e in rest)
        named.append(f"and {len(rest)} more stretches ({rest_h:.1f} h)")
    return "; ".join(named)
