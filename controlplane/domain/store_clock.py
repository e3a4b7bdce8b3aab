"""Now for a store, by the clock its reconcile loop runs on (pure).

A simulated fleet (``headroom demo``, ``serve --backend sim``: the store's ``sim-fleet`` lease)
runs on its own clock, which a demo started with ``--start`` puts days ahead of the wall clock
and a demo resumed later leaves behind it; the loop reads hints, forecasts and ticks by that
clock. Whatever judges a time against "now" for such a store (a hint's end already past, the
hints in force) judges it by the same clock, or it accepts a hint the loop has already passed
and refuses one the loop will apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from controlplane.domain.timestamps import utc_text


@dataclass(frozen=True, slots=True)
class StoreNow:
    at: datetime
    simulated: bool  # by the store's simulated clock; False: by the wall clock

    def text(self) -> str:
        """``2026-12-10T08:10:00Z by the store's simulated clock`` (or ``by the wall clock``)."""
        clock = "the store's simulated clock" if self.simulated else "the wall clock"
        return f"{utc_text(self.at)} by {clock}"


def store_now(simulated: bool, last_tick_at: datetime | None, wall_now: datetime) -> StoreNow:
    """Now for a store: a simulated fleet's is its last tick (the simulated clock as the run
    left it), a real fleet's the wall clock, as is a simulated one's before its first tick
    (its clock starts at the wall clock's now unless ``demo --start`` says otherwise)."""
    if simulated and last_tick_at is not None:
        return StoreNow(last_tick_at, True)
    return StoreNow(wall_now, False)
