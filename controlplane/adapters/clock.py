"""WallClock: the real clock (the only place outside tests that reads it)."""

from __future__ import annotations

import time
from datetime import UTC, datetime


class WallClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()
