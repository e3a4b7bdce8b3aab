"""The warm-pool ladder: how many replicas each rung holds for one model (pure).

Rungs, fastest first: ``hot`` replicas serve traffic; ``idle`` replicas are loaded but not routed
(vLLM sleep mode, Triton loaded but unrouted) and wake in seconds; ``cached`` capacity is free GPU
share on nodes that are up and hold the model's image and weights (a start there is the fast mode
of the cold-start distribution); ``cold`` means a new node (provisioning + a full model load).

Each rung covers the demand until the next, slower rung could serve: rung *i* is sized so that the
replicas up to and including it cover the forecast's upper quantile over ``reaction_s`` plus the
wake time of rung *i + 1*. The quantile is the newsvendor's critical ratio per decision period
(``reaction_s``): keeping one more unit costs its idle price for that period; missing it costs the
demand it would have served for as long as the miss lasts, i.e. until the next rung serves
(``reaction_s + wake of rung i + 1``). So

    q = 1 - idle $/h x reaction_s / (shortfall $/rps-h x rps per replica x (reaction_s + next wake))

and a rung backed by a slow one (cached capacity backed by new nodes) covers a higher quantile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from controlplane.autoscaling.distribution import expected_shortfall
from controlplane.domain.demand import overlapping_steps, replicas_for, window_quantile
from forecaster.types import Forecast


class Rung(StrEnum):
    HOT = "hot"
    IDLE = "idle"
    CACHED = "cached"
    COLD = "cold"


@dataclass(frozen=True, slots=True)
class RungSpec:
    rung: Rung
    wake_s: float  # p90 time until a unit of this rung serves (0 for hot)
    idle_usd_per_h: float  # cost of keeping one replica's worth in this rung for an hour


@dataclass(frozen=True, slots=True)
class LadderPolicy:
    reaction_s: float  # time to notice a change and act (reconcile interval + metric window)
    shortfall_usd_per_rps_h: float  # price of one rps of unserved demand for an hour
    min_quantile: float = 0.5
    max_quantile: float = 0.995
    keep_s: float = 0.0  # the rung before cold also covers this much longer (see size_ladder)

    def __post_init__(self) -> None:
        if self.reaction_s < 0 or self.shortfall_usd_per_rps_h <= 0:
            raise ValueError("reaction_s must be >= 0 and shortfall_usd_per_rps_h > 0")
        if not 0 < self.min_quantile <= self.max_quantile < 1:
            raise ValueError("need 0 < min_quantile <= max_quantile < 1")


@dataclass(frozen=True, slots=True)
class RungSize:
    rung: Rung
    replicas: int  # units held in this rung
    cumulative: int  # replicas that can serve within this rung's wake time
    window_s: float  # the demand window this rung covers (until the next rung can serve)
    quantile: float
    covered_rps: float  # the demand quantile the cumulative replicas were sized for
    expected_shortfall_rps: float  # E[(demand - capacity)+], lognormal through window p50/p90
    idle_usd_per_h: float


@dataclass(frozen=True, slots=True)
class ModelLadder:
    model: str
    rungs: tuple[RungSize, ...]

    def replicas(self, rung: Rung) -> int:
        return sum(r.replicas for r in self.rungs if r.rung == rung)

    @property
    def idle_usd_per_h(self) -> float:
        return sum(r.idle_usd_per_h for r in self.rungs)


def critical_quantile(idle_usd_per_h: float, unit_rps: float, policy: LadderPolicy,
                      next_wake_s: float = 0.0) -> float:
    """Newsvendor critical ratio for one unit of ``unit_rps`` whose miss lasts until a rung that
    wakes in ``next_wake_s`` serves, clamped to the policy's range."""
    if unit_rps <= 0:
        raise ValueError(f"unit_rps must be > 0, got {unit_rps}")
    period_s = max(policy.reaction_s, 1e-9)
    outage = (period_s + max(0.0, next_wake_s)) / period_s
    q = 1.0 - idle_usd_per_h / (policy.shortfall_usd_per_rps_h * unit_rps * outage)
    return min(policy.max_quantile, max(policy.min_quantile, q))


def window_bounds(forecast: Forecast | None, observed_rps: float, now: datetime,
                  window_s: float) -> tuple[float, float]:
    """(p50, p90) of the demand over [now, now + window_s]: the highest forecast step in the
    window, never below the load seen now. Without a forecast step in the window, the observed
    load with no spread."""
    if forecast is None:
        return observed_rps, observed_rps
    steps = overlapping_steps(forecast, now, window_s)
    p50 = max((forecast.p50[i] for i in steps), default=observed_rps)
    p90 = max((forecast.p90[i] for i in steps), default=observed_rps)
    return max(p50, observed_rps), max(p90, p50, observed_rps)


def size_ladder(
    model: str,
    forecast: Forecast | None,
    observed_rps: float,
    now: datetime,
    unit_rps: float,
    hot_replicas: int,
    rungs: Sequence[RungSpec],
    policy: LadderPolicy,
) -> ModelLadder:
    """Size every rung above ``hot_replicas`` (chosen by the demand policy) for one model.

    ``rungs`` lists the rungs from hot to cold; the last one (cold) is unbounded and holds nothing.
    The rung before cold (warm GPUs on nodes that are up) covers ``keep_s`` longer: a node given
    back now and needed again within its provisioning time would be billed again for that time
    anyway, so it is not worth releasing.
    """
    if len(rungs) < 2 or rungs[0].rung != Rung.HOT:
        raise ValueError("rungs must start with hot and end with the slowest rung")
    out: list[RungSize] = []
    cumulative = 0
    for i, spec in enumerate(rungs[:-1]):
        window_s = policy.reaction_s + rungs[i + 1].wake_s
        if i == len(rungs) - 2:
            window_s += policy.keep_s
        q = critical_quantile(spec.idle_usd_per_h, unit_rps, policy, rungs[i + 1].wake_s)
        p50, p90 = window_bounds(forecast, observed_rps, now, window_s)
        found = None if forecast is None else window_quantile(forecast, now, window_s, q)
        need_rps = max(observed_rps, found if found is not None else observed_rps)
        target = hot_replicas if spec.rung == Rung.HOT else max(
            cumulative, replicas_for(need_rps, unit_rps))
        units = target - cumulative
        out.append(RungSize(spec.rung, units, target, window_s, q, need_rps,
                            expected_shortfall(p50, p90, target * unit_rps),
                            units * spec.idle_usd_per_h))
        cumulative = target
    return ModelLadder(model, tuple(out))
