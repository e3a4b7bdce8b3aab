"""VirtualClock: simulated time that only moves when told to (tests, simulator, demo)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta


class VirtualClock:
    def __init__(self, start_at: datetime) -> None:
        if start_at.tzinfo is None:
            raise ValueError("VirtualClock needs a timezone-aware start")
        self._start_at = start_at
        self._elapsed_s = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._start_at + timedelta(seconds=self._elapsed_s)

    def monotonic(self) -> float:
        with self._lock:
            return self._elapsed_s

    def advance(self, seconds: float) -> datetime:
        if seconds < 0:
            raise ValueError("time does not run backwards")
        with self._lock:
            self._elapsed_s += seconds
            return self._start_at + timedelta(seconds=self._elapsed_s)
