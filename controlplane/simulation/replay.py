"""What the replayed fleet can observe of the trace, and when (no peeking at the future).

* ``observed_rps(model, t)``: the rate over the last ``window_s`` seconds [t - window_s, t), like
  a Prometheus ``rate`` over that window; before the first minute, the first minute's rate.
* ``history(model, minute, ...)``: the complete minutes before ``minute`` at the forecast step,
  the last (current) step averaged over the minutes seen so far. A forecast made at minute m
  therefore uses only data before m.
"""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import numpy as np

from controlplane.simulation.trace import Trace
from forecaster.types import TrafficSeries


class DemandReplay:
    def __init__(self, trace: Trace, window_s: float = 30.0) -> None:
        if not 0 < window_s <= 3600:
            raise ValueError(f"observation window must be in (0, 3600] s, got {window_s}")
        self._trace = trace
        self._window_s = window_s
        self._rates = {m: np.asarray(v, dtype=float) for m, v in trace.rates_rps.items()}
        self._cumsum = {m: np.concatenate(([0.0], np.cumsum(v))) for m, v in self._rates.items()}

    @property
    def trace(self) -> Trace:
        return self._trace

    def rate(self, model: str, minute: int) -> float:
        rates = self._rates[model]
        return float(rates[min(max(minute, 0), len(rates) - 1)])

    def mean_rate(self, model: str, first: int, end: int) -> float:
        """Mean rate over minutes [first, end) (clipped to the trace)."""
        sums = self._cumsum[model]
        first, end = max(0, first), min(end, len(sums) - 1)
        return float((sums[end] - sums[first]) / (end - first)) if end > first else 0.0

    def observed_rps(self, model: str, t_s: float) -> float:
        start_s = t_s - self._window_s
        total, at = 0.0, start_s
        while at < t_s - 1e-9:
            minute = int(at // 60)
            until = min(t_s, (minute + 1) * 60)
            total += self.rate(model, minute) * (until - at)
            at = until
        return total / self._window_s

    def history(self, model: str, minute: int, step_s: int, history_s: int) -> TrafficSeries | None:
        """Series at ``step_s`` (a whole number of minutes) of the minutes before ``minute``."""
        per_step = max(1, step_s // 60)
        end = min(minute, len(self._rates[model]))
        if end <= 0:
            return None
        first = max(0, end - history_s // 60) // per_step * per_step
        edges = [*range(first, end, per_step), end]
        sums = self._cumsum[model]
        values = tuple(float((sums[b] - sums[a]) / (b - a)) for a, b in pairwise(edges))
        start_at = self._trace.start_at + timedelta(minutes=first)
        return TrafficSeries(series_id=model, step_s=per_step * 60, start_at=start_at,
                             values=values)
