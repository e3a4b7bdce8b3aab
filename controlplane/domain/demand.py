"""Demand: how much capacity each model needs over the next cold-start window (pure).

Three policies share this one function, chosen by ``DemandPolicy.mode``:

* ``predictive`` (Headroom): the forecast's upper quantile (p90 by default; other quantiles are
  read off a lognormal through p50 and p90) over the lookahead, never below what the model sees
  now. When the observed load runs above that (a burst the forecast missed, not a fall it
  predicted for the coming moments), a reactive fast path provisions observed x
  ``stale_headroom`` at once, like Knative's panic mode.
* ``reactive`` (KEDA/HPA-like): observed load / target utilization, forecasts ignored.
* ``static``: the configured peak per model, whatever happens.

A model whose load was not measured this tick (``ObservedModel.demand_measured`` False) is
sized from its fresh forecast or static peak alone, with no fast path; without either it holds
the capacity it has, for a stale reason (``demand_unmeasured``), so nothing scales down on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from statistics import NormalDist

from controlplane.domain.models import ModelSpec, ProfilePoint
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.domain.observed_load import kv_cache_load_rps, observed_load_rps
from forecaster.types import Forecast

STALE_FORECAST = "stale_forecast"
#: a forecast whose origin lies over a step plus ``MAX_CLOCK_SKEW_S`` after now: refused as stale
FUTURE_FORECAST = "future_forecast"
NO_FORECAST = "no_forecast"
FORECAST_P90 = "forecast_p90"
FORECAST_QUANTILE = "forecast_upper_quantile"
OBSERVED_ABOVE_FORECAST = "observed_above_forecast"
HOT_HEADROOM = "hot_headroom"  # raised to the next step's quantile (controlplane.autoscaling)
OBSERVED_LOAD = "observed_load"
STATIC_PEAK = "static_peak"
NO_STATIC_PEAK = "no_static_peak"
DEMAND_UNMEASURED = "demand_unmeasured"  # the load source could not say: capacity held

PREDICTIVE = "predictive"
REACTIVE = "reactive"
STATIC = "static"
MODES = (PREDICTIVE, REACTIVE, STATIC)
#: Demand reasons whose inputs were not fresh: a scale-down should not act on them.
#: the suffix of a demand reason a demand hint raised (``controlplane.autoscaling.hints``)
HINTED = "+demand_hint"
STALE_REASONS = frozenset({STALE_FORECAST, FUTURE_FORECAST, NO_FORECAST, NO_STATIC_PEAK,
                           DEMAND_UNMEASURED})
#: Clock skew tolerated between the forecast job's host and this one. A forecast's origin is the
#: start of its first step: the forecast job's is never after its now (the end of the last whole
#: step observed), a replay's at most the next step boundary. One more than a step plus this
#: after now comes from a skewed clock or a bad row; its "age" (now - origin) is negative, under
#: any staleness limit, so it is refused as stale on its own rule (``from_the_future``).
MAX_CLOCK_SKEW_S = 60.0

_Z90 = NormalDist().inv_cdf(0.9)
#: Quantiles at which a calibrated forecast carries ratios to p50 in its diagnostics
#: (``upper_ratio_q0.99`` ...), learned from its recent errors (``controlplane.autoscaling``).
CALIBRATION_GRID = (0.5, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995)
_RATIO_PREFIX = "upper_ratio_q"


def ratio_key(quantile: float) -> str:
    return f"{_RATIO_PREFIX}{quantile:g}"


def calibrated_ratio(diagnostics: Mapping[str, float], quantile: float) -> float | None:
    """Ratio to p50 at ``quantile`` from a forecast's calibration (linear between grid points,
    clamped at the ends); None when the forecast carries none."""
    points = [(q, diagnostics[ratio_key(q)]) for q in CALIBRATION_GRID
              if ratio_key(q) in diagnostics]
    if len(points) < 2:
        return None
    if quantile <= points[0][0]:
        return points[0][1]
    for (q0, r0), (q1, r1) in pairwise(points):
        if quantile <= q1:
            return r0 + (r1 - r0) * (quantile - q0) / (q1 - q0)
    return points[-1][1]


@dataclass(frozen=True, slots=True)
class DemandPolicy:
    target_utilization: float  # provision capacity = need / target_utilization
    lookahead_s: float  # window of the forecast to cover (provisioning + cold start)
    max_forecast_age_s: float
    stale_headroom: float  # multiplier on observed load when there is no usable forecast
    mode: str = PREDICTIVE
    upper_quantile: float = 0.9  # quantile of the forecast to provision for (predictive)
    static_rps: tuple[tuple[str, float], ...] = ()  # peak per model (static)
    observed_lag_s: float = 0.0  # the load metric's window: observed load is [now - this, now)
    #: a model's queued requests count as load that drains within this (0: not counted)
    queue_drain_s: float = 0.0
    #: the KV cache usage (0-1) a model's ready replicas are sized to (0: not counted)
    kv_cache_target: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"demand policy mode must be one of {MODES}, got {self.mode!r}")
        if not 0 < self.target_utilization <= 1:
            raise ValueError("target_utilization must be in (0, 1]")
        if not 0.5 <= self.upper_quantile < 1:
            raise ValueError("upper_quantile must be in [0.5, 1)")
        if self.queue_drain_s < 0:
            raise ValueError("queue_drain_s must be >= 0")
        if not 0 <= self.kv_cache_target <= 1:
            raise ValueError("kv_cache_target must be in [0, 1]")

    def static_peak(self, model: str) -> float | None:
        return next((rps for name, rps in self.static_rps if name == model), None)


@dataclass(frozen=True, slots=True)
class Demand:
    model: str
    rate_rps: float  # capacity to provision
    observed_rps: float
    forecast_p90_rps: float
    reason: str
    forecast_upper_rps: float = 0.0  # the upper quantile the predictive policy covered

    @property
    def is_fresh(self) -> bool:
        """Whether the inputs were fresh; a suffix on the reason (``+demand_hint``: a hint set
        the need) does not make a stale one fresh."""
        return self.reason.partition("+")[0] not in STALE_REASONS


def upper_quantile(p50: float, p90: float, quantile: float) -> float:
    """The ``quantile`` of a lognormal through ``p50`` and ``p90``.

    Falls back to a straight line through 0 and p90 when p50 is 0, and to p90 when the two do not
    spread (p90 <= p50). Quantile 0.9 returns p90 exactly. Above p90 the tail never rises faster
    than that straight line: a lognormal through a median near 0 (a sparse series) would put its
    99.5th percentile at (p90 / p50)^2 x p50, orders of magnitude above anything seen.
    """
    p50, p90 = max(0.0, p50), max(0.0, p90)
    if quantile == 0.9 or p90 <= p50:
        return max(p50, p90)
    ratio = NormalDist().inv_cdf(quantile) / _Z90
    if p50 <= 0:
        return max(0.0, p90 * ratio)
    lognormal = p50 * math.exp(ratio * math.log(p90 / p50))
    return float(min(lognormal, p90 * ratio)) if quantile > 0.9 else float(lognormal)


def origin_ahead_s(forecast: Forecast, now: datetime) -> float:
    """How many seconds after ``now`` the forecast's origin lies (negative: before now)."""
    return (forecast.origin_at - now).total_seconds()


def from_the_future(forecast: Forecast, now: datetime) -> bool:
    """Whether the forecast's origin lies more than one of its steps plus ``MAX_CLOCK_SKEW_S``
    after ``now``: a skewed clock or a bad row, not a forecast of the next step."""
    return origin_ahead_s(forecast, now) > forecast.step_s + MAX_CLOCK_SKEW_S


def overlapping_steps(forecast: Forecast, now: datetime, window_s: float) -> list[int]:
    """Indices of the forecast steps that overlap [now, now + window_s]."""
    out = []
    for i in range(len(forecast.p90)):
        at = forecast.origin_at + timedelta(seconds=i * forecast.step_s)
        if at + timedelta(seconds=forecast.step_s) <= now:
            continue
        if at > now + timedelta(seconds=window_s):
            break
        out.append(i)
    return out


def one_request_rps(step_s: float) -> float:
    """The rate of one request per step: a median below it forecasts whole requests (a sparse
    series), whose misses are no ratio to it."""
    return 1.0 / step_s


def step_quantile(forecast: Forecast, step: int, quantile: float) -> float:
    """``quantile`` of one forecast step: from the forecast's calibrated ratios when it carries
    them (and p50 is at least one request per step), else from the lognormal through its p50
    and p90."""
    p50 = forecast.p50[step]
    counted = p50 >= one_request_rps(forecast.step_s)  # so p50 > 0
    ratio = calibrated_ratio(forecast.diagnostics, quantile) if counted else None
    if ratio is not None:
        return p50 * ratio
    return upper_quantile(p50, forecast.p90[step], quantile)


def window_quantile(forecast: Forecast, now: datetime, window_s: float,
                    quantile: float = 0.9) -> float | None:
    """Highest ``quantile`` among the forecast steps overlapping [now, now + window_s]; None when
    no step overlaps (the whole forecast lies before now or after the window)."""
    steps = overlapping_steps(forecast, now, window_s)
    if not steps:
        return None
    return max(step_quantile(forecast, i, quantile) for i in steps)


def _window_p90(forecast: Forecast, now: datetime, lookahead_s: float) -> float:
    """Highest p90 among forecast steps from now to now + lookahead (origin may be in the past)."""
    found = window_quantile(forecast, now, lookahead_s, 0.9)
    if found is not None:
        return found
    return forecast.p90[-1] if forecast.p90 else 0.0


def refused_forecast(forecast: Forecast, policy: DemandPolicy, now: datetime) -> str | None:
    """Why the forecast is not sized from: ``stale_forecast`` (older than the policy's limit),
    ``future_forecast`` (``from_the_future``); None when it is usable."""
    if (now - forecast.origin_at).total_seconds() > policy.max_forecast_age_s:
        return STALE_FORECAST
    if from_the_future(forecast, now):
        return FUTURE_FORECAST
    return None


def _predictive(forecast: Forecast | None, observed_rps: float, policy: DemandPolicy,
                now: datetime, hint_rps: float = 0.0,
                steady_rps: float = 0.0) -> tuple[float, float, float, str]:
    """(need, p90, upper, reason) of the predictive policy. Without a usable forecast (none,
    stale, from the future) the need is the observed load x ``stale_headroom`` or, when above,
    ``hint_rps`` (the demand hints in force over the lookahead, which a usable forecast
    carries as its floor instead). ``steady_rps``: load seen that is no burst (the KV cache's,
    ``observed_load.kv_cache_load_rps``): compared with the forecast as the observed load is,
    but never multiplied by ``stale_headroom``."""
    if forecast is None:
        return max(observed_rps * policy.stale_headroom, hint_rps, steady_rps), 0.0, 0.0, \
            NO_FORECAST
    refused = refused_forecast(forecast, policy, now)
    if refused is not None:
        return max(observed_rps * policy.stale_headroom, hint_rps, steady_rps), 0.0, 0.0, \
            refused
    p90 = _window_p90(forecast, now, policy.lookahead_s)
    if policy.upper_quantile == 0.9:
        upper, reason = p90, FORECAST_P90
    else:
        found = window_quantile(forecast, now, policy.lookahead_s, policy.upper_quantile)
        # A forecast that starts after the window says nothing about it: the load seen now is
        # the best estimate of the next moments.
        upper = max(observed_rps, steady_rps) if found is None else found
        reason = FORECAST_QUANTILE
    seen_rps = max(observed_rps, steady_rps)
    if covers(upper, seen_rps) or _forecast_saw(forecast, seen_rps, policy, now):
        return upper, p90, upper, reason
    return max(observed_rps * policy.stale_headroom, steady_rps), p90, upper, \
        OBSERVED_ABOVE_FORECAST


def _forecast_saw(forecast: Forecast, observed_rps: float, policy: DemandPolicy,
                  now: datetime) -> bool:
    """Whether the forecast expected the load seen over the metric's window (a fall it
    predicted, not a burst it missed): then the fast path stays off."""
    if policy.observed_lag_s <= 0:
        return False
    seen = window_quantile(forecast, now - timedelta(seconds=policy.observed_lag_s),
                           policy.observed_lag_s, policy.upper_quantile)
    return seen is not None and covers(seen, observed_rps)


#: how far (relative) the observed load may sit above a forecast that still covers it: float
#: rounding, not traffic (a flat series' forecast stored as 99.99999999999999 rps and
#: Prometheus' rate() reading 100.0 on one scrape and 99.99999999999999 on the next flapped the
#: fast path, a replica up and down every minute)
COVER_REL_TOLERANCE = 1e-9


def covers(forecast_rps: float, observed_rps: float) -> bool:
    """Whether a forecast of ``forecast_rps`` covers the load seen, up to float rounding."""
    return observed_rps <= forecast_rps * (1 + COVER_REL_TOLERANCE)


def demand_for(
    spec: ModelSpec,
    forecast: Forecast | None,
    observed_rps: float,
    policy: DemandPolicy,
    now: datetime,
    hint_rps: float = 0.0,
    steady_rps: float = 0.0,
) -> Demand:
    """Capacity a model needs under the policy's mode (see the module docstring); ``hint_rps``,
    the demand hints in force over the lookahead, counts for the predictive policy without a
    usable forecast (``_predictive``); ``steady_rps``, load seen that is no burst (its KV
    cache's), counts as observed load that the fast path does not multiply."""
    p90 = upper = 0.0
    if policy.mode == REACTIVE:
        need, reason = max(observed_rps, steady_rps), OBSERVED_LOAD
    elif policy.mode == STATIC:
        peak = policy.static_peak(spec.name)
        need, reason = (max(observed_rps * policy.stale_headroom, steady_rps), NO_STATIC_PEAK) \
            if peak is None else (max(peak, observed_rps, steady_rps), STATIC_PEAK)
    else:
        need, p90, upper, reason = _predictive(forecast, observed_rps, policy, now, hint_rps,
                                               steady_rps)
    return Demand(
        model=spec.name,
        rate_rps=need / policy.target_utilization,
        observed_rps=max(observed_rps, steady_rps),
        forecast_p90_rps=p90,
        reason=reason,
        forecast_upper_rps=upper,
    )


def demand_from(
    specs: Sequence[ModelSpec],
    forecasts: Mapping[str, Forecast],
    observed: ObservedState,
    policy: DemandPolicy,
    now: datetime,
    hint_rps: Mapping[str, float] | None = None,
) -> tuple[Demand, ...]:
    """Each model's ``demand_for`` (``hint_rps``: by model, the hints in force over the
    lookahead)."""
    hints = hint_rps or {}
    out = []
    for spec in specs:
        seen = observed.model(spec.name)
        if seen is not None and not seen.demand_measured:
            out.append(unmeasured_demand(spec, forecasts.get(spec.name), seen, policy, now,
                                         hints.get(spec.name, 0.0)))
            continue
        out.append(demand_for(spec, forecasts.get(spec.name),
                              observed_load_rps(seen, policy) if seen else 0.0,
                              policy, now, hints.get(spec.name, 0.0),
                              kv_cache_load_rps(seen, policy) if seen else 0.0))
    return tuple(out)


def unmeasured_demand(spec: ModelSpec, forecast: Forecast | None, seen: ObservedModel,
                      policy: DemandPolicy, now: datetime, hint_rps: float = 0.0) -> Demand:
    """Demand of a model whose load is unknown this tick: the fresh forecast's upper quantile
    over the lookahead (no fast path: there is no load to compare) or the static peak; else
    the capacity its ready replicas have, held for a stale reason, or (predictive) the demand
    hints in force over the lookahead (``hint_rps``) when they ask for more: an operator's
    announced floor holds when the load source fails too (reason ``demand_unmeasured`` +
    ``HINTED``)."""
    planned = demand_for(spec, forecast, 0.0, policy, now, hint_rps)
    covered = planned.reason in (FORECAST_P90, FORECAST_QUANTILE) and forecast is not None \
        and window_quantile(forecast, now, policy.lookahead_s, policy.upper_quantile) is not None
    if covered or planned.reason == STATIC_PEAK:
        return planned
    hinted_rps = hint_rps / policy.target_utilization if policy.mode == PREDICTIVE else 0.0
    if hinted_rps > seen.capacity_rps:
        return Demand(model=spec.name, rate_rps=hinted_rps, observed_rps=0.0,
                      forecast_p90_rps=0.0, reason=DEMAND_UNMEASURED + HINTED)
    return Demand(model=spec.name, rate_rps=seen.capacity_rps, observed_rps=0.0,
                  forecast_p90_rps=0.0, reason=DEMAND_UNMEASURED)


@dataclass(frozen=True, slots=True)
class SliceReplicas:
    """Replicas of one model on one slice type (GPU product x MIG size / MPS share / whole GPU)."""

    model: str
    point: ProfilePoint
    replicas: int

    @property
    def capacity_rps(self) -> float:
        return self.replicas * self.point.replica_rps


def replicas_for(rate_rps: float, throughput_rps: float) -> int:
    """Whole replicas of ``throughput_rps`` each that serve ``rate_rps`` (0 for no demand)."""
    if throughput_rps <= 0:
        raise ValueError(f"throughput_rps must be > 0, got {throughput_rps}")
    if rate_rps <= 0:
        return 0
    return max(1, math.ceil(rate_rps / throughput_rps - 1e-9))


def slice_replicas(demand: Demand, spec: ModelSpec) -> SliceReplicas:
    """Replicas on the model's best slice type (highest throughput within 0.45 x its SLO)."""
    point = spec.best_point()
    return SliceReplicas(spec.name, point, replicas_for(demand.rate_rps, point.replica_rps))
