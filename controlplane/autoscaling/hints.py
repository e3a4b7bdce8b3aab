"""Demand hints as floors on the forecasts the loop sizes from (pure: forecasts, hints and
``now`` in, forecasts out).

A forecast step ``[origin + i x step, origin + (i + 1) x step)`` that a model's hint window,
opened ``lead_s`` early, meets gets p50 and p90 of at least the hint's rate (the highest of the
hints that meet it), its p90 raised with its p50 by the same factor (``floored_step``). A
first step whose origin lies after now (a replay's forecast of the next step on a coarse grid,
a clock a little ahead) counts from now: the policy reads it for the time before its origin
too (``overlapping_steps``), so a hint ending in that time holds until its end. The
calibrated upper tail, kept as ratios to p50 in the diagnostics, then applies to the floored
p50 too, and without one the lognormal through p50 and p90 keeps the forecast's spread: a hint
is taken as the expected level, and the forecast's own errors say how far above it demand may
run, so no quantile the sizing reads falls below the forecaster's own. Steps the hints do not
meet, and models without hints, are returned as they are. A model the predictive policy
cannot size from a forecast (none yet, stale, from the future) is sized from its observed load
x ``stale_headroom`` or, when above, the rate of its hints in force over the lookahead
(``hint_floors``). Only the predictive policy reads hints: the reactive and static ones never
read a forecast. A hint never sizes fewer replicas than no hint: the core also sizes each
hinted model from its unhinted forecast (the fast path decided against that) and keeps the
higher (``core.size``'s ``unhinted``, ``Sizing.hint_outsized``).

The lead is the time the fleet needs to be ready (a GPU node's provisioning and the replica's
cold start: ``autoscaling.hint_lead_s``): the loop's own ladder scales ahead of a rise only by
its rungs' wake times, which an announced step from the current level to several times it
outruns (nodes to provision, not only replicas to start). A forecast changed by a hint says so
in ``diagnostics["hint_rps"]`` (the highest floor applied). Hints apply after calibration: the
forecast ledger scores what the forecaster issued, not the operator's floor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from controlplane.domain.demand import (
    FORECAST_P90,
    FORECAST_QUANTILE,
    FUTURE_FORECAST,
    HINTED,
    HOT_HEADROOM,
    NO_FORECAST,
    PREDICTIVE,
    STALE_FORECAST,
    Demand,
    DemandPolicy,
    one_request_rps,
)
from controlplane.domain.fleet_status import FleetStatus
from controlplane.domain.hints import DemandHint
from forecaster.types import Forecast

#: ``Forecast.diagnostics`` key of a forecast a hint floored: the highest floor applied
HINT_RPS = "hint_rps"


def floor_rps(hints: Sequence[DemandHint], since_at: datetime, until_at: datetime,
              lead_s: float = 0.0) -> float:
    """The highest rate of the hints whose window, opened ``lead_s`` early, meets
    [since_at, until_at); 0 without one."""
    lead = timedelta(seconds=lead_s)
    return max((h.rate_rps for h in hints if h.overlaps(since_at, until_at + lead)),
               default=0.0)


def _read_since(step_at: datetime, origin_at: datetime, now: datetime | None) -> datetime:
    """From when the loop reads the forecast step starting at ``step_at``: the first step (at
    ``origin_at``) from ``now`` when its origin lies after now, as ``overlapping_steps`` reads it;
    every other step, and any step without a ``now``, from its start."""
    return min(step_at, now) if step_at == origin_at and now is not None else step_at


def with_hints(forecasts: Mapping[str, Forecast], hints: Sequence[DemandHint], now: datetime,
               lead_s: float = 0.0) -> dict[str, Forecast]:
    """Every forecast with its steps floored by its model's hints that have not ended by
    ``now``, each from ``lead_s`` before its start."""
    by_model: dict[str, list[DemandHint]] = {}
    for hint in hints:
        if hint.end_at > now:
            by_model.setdefault(hint.model, []).append(hint)
    out = dict(forecasts)
    for model, forecast in forecasts.items():
        mine = by_model.get(model)
        if not mine:
            continue
        step, origin_at = timedelta(seconds=forecast.step_s), forecast.origin_at
        floors = [floor_rps(mine, _read_since(origin_at + i * step, origin_at, now),
                            origin_at + (i + 1) * step, lead_s)
                  for i in range(len(forecast.p50))]
        if not any(f > min(p50, p90) for f, p50, p90 in zip(floors, forecast.p50, forecast.p90,
                                                             strict=True)):
            continue
        steps = [floored_step(p50, p90, f, forecast.step_s)
                 for p50, p90, f in zip(forecast.p50, forecast.p90, floors, strict=True)]
        out[model] = replace(forecast, p50=tuple(p50 for p50, _ in steps),
                             p90=tuple(p90 for _, p90 in steps),
                             diagnostics={**forecast.diagnostics, HINT_RPS: max(floors)})
    return out


def floored_step(p50_rps: float, p90_rps: float, floor_rps: float,
                 step_s: float) -> tuple[float, float]:
    """(p50, p90) of one forecast step floored at ``floor_rps``, its upper tail on top: a p50
    of at least one request per step (``one_request_rps``) raised to the floor takes its p90
    up by the same factor, so the lognormal through them (and a calibrated ratio to p50) keeps
    the forecast's spread above the hint; raising p50 alone towards p90 narrowed it, and the
    upper quantiles the sizing reads above p90 fell below the forecaster's own. A sparse p50
    (fewer requests per step) is no level to take a ratio to: the floor becomes p50 and the
    forecaster's p90 stands on top of it. A p90 below the floor is raised to it; a step the
    floor does not reach is returned as it is."""
    if floor_rps <= min(p50_rps, p90_rps):
        return p50_rps, p90_rps
    if p50_rps >= one_request_rps(step_s):
        factor = max(1.0, floor_rps / p50_rps)
        return max(p50_rps, floor_rps), max(p90_rps * factor, floor_rps)
    if floor_rps <= p50_rps:
        return p50_rps, floor_rps
    return floor_rps, max(0.0, p90_rps) + floor_rps


def status_floors(status: FleetStatus, lead_s: float) -> FleetStatus:
    """``status`` with each model's ``hint_floor_rps``: the highest rate of its hints (those not
    ended at the last tick, each from ``lead_s`` before its start) over the forecast step the
    status shows, when above that step's p50 or p90, as ``with_hints`` floors it for the loop.
    So ``headroom status`` shows what sizes a hinted model, not only what the forecaster said."""
    now = status.last_tick.started_at if status.last_tick is not None else None
    models = []
    for m in status.models:
        point = m.forecast
        mine = [h for h in status.hints if h.model == m.name and (now is None or h.end_at > now)]
        if point is None or not mine:
            models.append(m)
            continue
        until_at = point.origin_at + timedelta(seconds=point.ahead_s)
        floor = floor_rps(mine, _read_since(point.target_at, point.origin_at, now), until_at,
                          lead_s)
        raised = floor > min(point.p50_rps, point.p90_rps)
        models.append(replace(m, hint_floor_rps=floor if raised else None))
    return replace(status, models=tuple(models))


def hint_floors(hints: Sequence[DemandHint], now: datetime, lookahead_s: float,
                lead_s: float = 0.0) -> dict[str, float]:
    """By model, the highest rate of its hints in force over [now, now + lookahead_s] (each
    opened ``lead_s`` early): what the predictive policy sizes a model without a usable
    forecast from, when above its observed load x ``stale_headroom``; models without such a
    hint are left out."""
    until_at = now + timedelta(seconds=lookahead_s)
    floors: dict[str, float] = {}
    for model in {h.model for h in hints}:
        floor = floor_rps([h for h in hints if h.model == model and h.end_at > now], now,
                          until_at, lead_s)
        if floor > 0:
            floors[model] = floor
    return floors


#: demand reasons read off a forecast (a hint's floor on it shows)
_FROM_FORECAST = frozenset({FORECAST_P90, FORECAST_QUANTILE, HOT_HEADROOM})
#: demand reasons of a predictive demand without a usable forecast (``hint_floors`` counts)
_WITHOUT_FORECAST = frozenset({NO_FORECAST, STALE_FORECAST, FUTURE_FORECAST})


def hinted_demands(demands: Sequence[Demand], forecasts: Mapping[str, Forecast],
                   floored: Mapping[str, Forecast], floors: Mapping[str, float],
                   policy: DemandPolicy, now: datetime,
                   outsized: frozenset[str] = frozenset()) -> tuple[Demand, ...]:
    """``demands`` with ``+demand_hint`` on the reason of each model a hint raised: the plan's
    replica targets and actions then say the announced demand sized them. Only the predictive
    policy reads hints. A demand read off the forecast is raised when a hint raised the
    forecast (``floored`` against ``forecasts``) in a step meeting [now, now + lookahead]; one
    without a usable forecast when its hint rate (``floors``) is above the observed load x
    ``stale_headroom`` (``_predictive``). The fast path (``observed_above_forecast``) is not
    raised by a hint; an unmeasured model a hint sized comes tagged (``unmeasured_demand``).
    Nor is a model in ``outsized`` (``Sizing.hint_outsized``): sized without its hints it asked
    for more, and that sizing stands."""
    if policy.mode != PREDICTIVE:
        return tuple(demands)
    until_at = now + timedelta(seconds=policy.lookahead_s)

    def raised_forecast(model: str) -> bool:
        before, after = forecasts.get(model), floored.get(model)
        if before is None or after is None or before is after:
            return False
        step = timedelta(seconds=after.step_s)
        return any(after.origin_at + i * step < until_at
                   and now < after.origin_at + (i + 1) * step
                   and (after.p50[i], after.p90[i]) != (before.p50[i], before.p90[i])
                   for i in range(len(after.p50)))

    def raised(demand: Demand) -> bool:
        if demand.model in outsized:
            return False
        if demand.reason in _FROM_FORECAST:
            return raised_forecast(demand.model)
        return demand.reason in _WITHOUT_FORECAST and floors.get(demand.model, 0.0) > (
            demand.observed_rps * policy.stale_headroom)

    return tuple(replace(d, reason=d.reason + HINTED) if raised(d) else d for d in demands)



@dataclass(frozen=True, slots=True)
class HintedInputs:
    """What the demand hints in force make of a tick's inputs, for the reconcile loop and the
    simulation alike: ``forecasts`` floored by them (``with_hints``), ``floors`` by model for a
    model without a usable forecast (``hint_floors``), and ``tagged`` to say which of the
    sized demands a hint raised (``hinted_demands``)."""

    calibrated: Mapping[str, Forecast]
    forecasts: Mapping[str, Forecast]
    floors: dict[str, float]
    now: datetime

    def tagged(self, demands: Sequence[Demand], policy: DemandPolicy,
               outsized: Sequence[str] = ()) -> tuple[Demand, ...]:
        return hinted_demands(demands, self.calibrated, self.forecasts, self.floors, policy,
                              self.now, frozenset(outsized))


def hinted_inputs(forecasts: Mapping[str, Forecast], hints: Sequence[DemandHint],
                  now: datetime, lead_s: float, lookahead_s: float) -> HintedInputs:
    """``forecasts`` and ``hints`` (each opened ``lead_s`` early) as the predictive policy
    reads them at ``now`` over ``lookahead_s``."""
    if not hints:
        return HintedInputs(forecasts, forecasts, {}, now)
    return HintedInputs(forecasts, with_hints(forecasts, hints, now, lead_s),
                        hint_floors(hints, now, lookahead_s, lead_s), now)
