"""Hot headroom: how far above the forecast's median the hot replicas stand (pure).

A model-minute is short when the replicas that served the *whole* minute fall below its demand,
so a rise that arrives before hot capacity has grown costs a short minute however fast the
warm rungs wake. The ladder's hot rung covers the next ``reaction_s`` only, which for a forecast
in 10-minute steps is the level seen now until the last minute before the next step. Headroom
makes the hot replicas also cover an upper quantile ``q`` of the forecast over the next step.

``q`` is a newsvendor choice per model with a price per short *model-minute*
(``short_minute_cost_ratio``, in replica-hours): over one forecast step, holding the quantile
costs ``replicas x (ratio_q - 1) x step`` replica-hours above the median, and a step above it
costs about one short minute, with probability ``1 - q``. The ratio ``ratio_q`` = quantile / p50
is the step's own (``controlplane.domain.demand.step_quantile``: the forecast's calibrated
errors when it has them, else a lognormal through its p50 and p90). A model with few replicas
buys a high quantile cheaply; a large one holds a lower quantile, since each point of it costs
many GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from controlplane.domain.demand import overlapping_steps, step_quantile
from forecaster.types import Forecast

#: Quantiles headroom chooses from.
QUANTILES = tuple(round(0.5 + 0.005 * k, 3) for k in range(100))


@dataclass(frozen=True, slots=True)
class Headroom:
    """What the hot replicas cover: quantile ``quantile`` of the next forecast step."""

    quantile: float
    rps: float


def best_quantile(ratios: dict[float, float], replicas: float, step_s: float,
                  short_minute_cost_ratio: float) -> float:
    """The quantile minimising replicas x (ratio_q - 1) x step hours + (1 - q) x price of a
    short minute (``ratios``: quantile -> ratio to p50, on ``QUANTILES``); ties to the lower."""
    step_h = step_s / 3600.0
    best_q, best_cost = QUANTILES[0], float("inf")
    for q in QUANTILES:
        cost = replicas * max(0.0, ratios[q] - 1.0) * step_h + (1.0 - q) * short_minute_cost_ratio
        if cost < best_cost - 1e-12:
            best_q, best_cost = q, cost
    return best_q


def next_step_headroom(forecast: Forecast, now: datetime, unit_rps: float,
                       short_minute_cost_ratio: float) -> Headroom | None:
    """Headroom over the forecast steps overlapping [now, now + one step] (None when none does
    or the policy prices no short minute)."""
    if short_minute_cost_ratio <= 0 or unit_rps <= 0:
        return None
    steps = overlapping_steps(forecast, now, forecast.step_s)
    if not steps:
        return None
    step = max(steps, key=lambda i: forecast.p50[i])
    p50 = forecast.p50[step]
    if p50 <= 0:
        return None
    ratios = {q: step_quantile(forecast, step, q) / p50 for q in QUANTILES}
    q = best_quantile(ratios, p50 / unit_rps, forecast.step_s, short_minute_cost_ratio)
    return Headroom(q, max(step_quantile(forecast, i, q) for i in steps))

