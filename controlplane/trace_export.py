"""``headroom trace export``: the demand the reconcile loop observed, as the trace ``headroom
simulate --trace`` replays (``ts,model,rate_rps``, simulate's default columns).

Each model's observations (one per tick that measured its load) are averaged per step of a
grid aligned to the epoch (``step_s`` 60: whole UTC minutes); a step without an observation
(the loop was down, or could not measure the model) is no row: a gap, which ``simulate`` refuses
unless ``--fill-gaps`` says how to fill it, never a zero (``Store.rate_history`` gives each
model's series, NaN where a step has none). The window is pure arithmetic here.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from controlplane.domain.timestamps import utc_text
from controlplane.store import Store
from controlplane.store.tables import ObservationRecord
from forecaster.errors import InputError
from forecaster.types import TrafficSeries

#: simulate's default ``--time-col``, ``--series-col`` and ``--value-col``
TRACE_COLUMNS = ("ts", "model", "rate_rps")


def on_grid(at: datetime, step_s: int) -> datetime:
    """``at`` floored to a multiple of ``step_s`` since the epoch."""
    epoch_s = math.floor(at.timestamp() / step_s) * step_s
    return datetime.fromtimestamp(epoch_s, UTC)


def export_window(first_at: datetime, last_at: datetime, step_s: int, days: float,
                  until_at: datetime | None, what: str, newest_step: bool = True
                  ) -> tuple[datetime, datetime]:
    """[since, until) on the step grid: ``days`` long, ending with the step that holds the newest
    record (``last_at``: an observation, a tick: ``what``; without ``newest_step`` before it, as
    the newest tick's step has only begun: its GPUs bill from one tick to the next), or at
    ``until_at`` floored to the grid (nothing at or after it is read), and starting no earlier
    than the step of the oldest (``first_at``)."""
    newest_end_at = on_grid(last_at, step_s) + timedelta(seconds=step_s if newest_step else 0)
    end_at = newest_end_at if until_at is None else min(newest_end_at, on_grid(until_at, step_s))
    start_at = max(on_grid(end_at - timedelta(days=days), step_s), on_grid(first_at, step_s))
    if start_at < end_at:
        return start_at, end_at
    if until_at is None:
        raise InputError(f"the store's {what}s span less than one step of {step_s} s so far; "
                         "nothing to export yet")
    raise InputError(f"--until {utc_text(until_at)}: at or before the store's first {what}'s "
                     f"step ({utc_text(start_at)}); nothing to export")


def observation_span(store: Store) -> tuple[datetime, datetime] | None:
    """The times of the oldest and the newest observation in ``store`` (None: none)."""
    from sqlalchemy import func
    from sqlmodel import select

    from controlplane.store.utc import as_utc

    with store.session() as session:
        first_at, last_at = session.exec(select(func.min(ObservationRecord.at),
                                                func.max(ObservationRecord.at))).one()
    return None if first_at is None else (as_utc(first_at), as_utc(last_at))


def trace_csv(series: Sequence[TrafficSeries]) -> tuple[str, int]:
    """The trace CSV of ``series`` (one grid), rows by time and then model, and its row count."""
    rows = sorted(((s.start_at + timedelta(seconds=i * s.step_s), s.series_id, v)
                   for s in series for i, v in enumerate(s.values) if not math.isnan(v)),
                  key=lambda row: (row[0], row[1]))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TRACE_COLUMNS)
    writer.writerows((utc_text(at), model, repr(rate_rps)) for at, model, rate_rps in rows)
    return out.getvalue(), len(rows)


def gap_warnings(series: Sequence[TrafficSeries]) -> list[str]:
    """One line per model with steps of no observation: how many, the first, and what
    ``simulate`` does with them (a model with none at all is not in the trace)."""
    lines = []
    for s in series:
        missing = [i for i, v in enumerate(s.values) if math.isnan(v)]
        if len(missing) == len(s.values):
            lines.append(f"model {s.series_id!r}: no observation in the window: not in the "
                         "trace (simulate refuses a models file that lists it)")
        elif missing:
            first_at = s.start_at + timedelta(seconds=missing[0] * s.step_s)
            lines.append(f"model {s.series_id!r}: {len(missing)} of {len(s.values)} steps "
                         f"without an observation, first at {utc_text(first_at)}: gaps, not "
                         "zeros (simulate replays them with --fill-gaps hold or zero)")
    return lines
