"""Who wrote the recorded ticks, and when that last changed (pure).

Every tick records the process that wrote it: under ``headroom serve --backend kubernetes`` the
Lease holder identity of the replica that led, else the store lease holder of ``serve --backend
sim`` or ``headroom demo`` (migration 0016; ``None`` on ticks saved before, or by a writer that
did not say). Ticks are written only by the process that leads, so a change of writer between
two ticks is a change of leader: ``headroom status`` shows the newest one."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

#: how many ticks before the newest are searched for a change of writer (2 h at 30 s a tick)
WRITER_LOOKBACK_TICKS = 240
#: the writer of a tick saved before ticks named theirs (migration 0016)
UNKNOWN_WRITER = "unknown (recorded before Headroom named writers)"


@dataclass(frozen=True, slots=True)
class WrittenTick:
    tick_id: int
    started_at: datetime
    writer: str | None  # None: not recorded


@dataclass(frozen=True, slots=True)
class LeadershipChange:
    """The newest change of writer: ``writer`` wrote every tick from ``first_tick_id`` (started
    ``changed_at``) on; before it ``previous_writer`` wrote, last at ``previous_tick_at``."""

    previous_writer: str
    previous_tick_at: datetime
    writer: str
    first_tick_id: int
    changed_at: datetime


def leadership_change(newest_first: Iterable[WrittenTick]) -> LeadershipChange | None:
    """The newest change of writer among ``newest_first`` (ticks, newest first); None when one
    writer wrote them all, the newest writer is not recorded, or the run of the newest writer
    reaches back to ticks whose writer is not recorded (an upgrade from before migration 0016
    is not a change of leader)."""
    ticks = iter(newest_first)
    first = next(ticks, None)
    if first is None or first.writer is None:
        return None
    for tick in ticks:
        if tick.writer is None:
            return None
        if tick.writer != first.writer:
            return LeadershipChange(tick.writer, tick.started_at, first.writer, first.tick_id,
                                    first.started_at)
        first = tick
    return None
