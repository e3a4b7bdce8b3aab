"""The real clock for the placement engine's leases (the scheduler's one place that reads it;
``controlplane.adapters.clock`` is the control plane's): engines on one journal compare lease
expiries across processes, so they are Unix seconds, not a monotonic clock."""

from __future__ import annotations

import time


def unix_now_s() -> float:
    return time.time()
