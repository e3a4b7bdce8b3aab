"""Whether a model needs any replica at all (pure): KEDA's ``IsActive``, which alone moves a
ScaledObject between zero replicas and one.

A model is active while the rate it was observed serving over the lookahead, or the rate its
forecast *expects* over the lookahead (the median, p50, weighted by how much of each step lies
inside the window: the expected requests in the window / its length), is above the activation
rate. The upper tail (p90) is not used: a calibrated upper quantile is the hedge against a burst
nobody forecast, and over a model idle all night it stays around 0.1 rps rather than 0, so a
model compared on it never scales to zero. The default activation is one request per lookahead
(``default_activation_rps``): a window in which less than one request is expected is idle, one in
which a request was served, or in which traffic is forecast to arrive, is not.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from controlplane.domain.demand import overlapping_steps
from forecaster.types import Forecast


def default_activation_rps(lookahead_s: float) -> float:
    """One request per lookahead: fewer expected in the window is idle."""
    return 1.0 / lookahead_s


def expected_rps(forecast: Forecast, now: datetime, window_s: float) -> float:
    """The forecast's median rate over [now, now + window_s]: each overlapping step's p50
    weighted by the seconds of it inside the window (expected requests / ``window_s``). With no
    step inside the window, the nearest step's p50 stands in (the last one of a forecast that has
    run out, the first one of a forecast that starts after the window)."""
    steps = overlapping_steps(forecast, now, window_s)
    if not steps:
        nearest = 0 if forecast.origin_at > now else len(forecast.p50) - 1
        return max(0.0, forecast.p50[nearest])
    until = now + timedelta(seconds=window_s)
    requests = 0.0
    for i in steps:
        start = forecast.origin_at + timedelta(seconds=i * forecast.step_s)
        end = start + timedelta(seconds=forecast.step_s)
        inside_s = (min(end, until) - max(start, now)).total_seconds()
        requests += max(0.0, forecast.p50[i]) * max(0.0, inside_s)
    return requests / window_s


def is_active(expected_rate_rps: float, observed_peak_rps: float | None,
              activation_rps: float) -> bool:
    """Active while the forecast's expected rate or the observed one is above the activation
    rate (KEDA's convention for built-in scalers: active when the value is above
    ``activation...``); ``observed_peak_rps`` None: nothing observed is known."""
    observed = observed_peak_rps if observed_peak_rps is not None else 0.0
    return expected_rate_rps > activation_rps or observed > activation_rps
