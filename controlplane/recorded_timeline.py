"""``headroom trace timeline``: what the reconcile loop did, minute by minute, as the timeline
``headroom simulate`` writes (its columns, which ``sim_score.py`` and the dashboard's What-if page
read), so the loop that ran is scored as a simulated policy is, over the same demand
(``headroom trace export``).

Per minute and model, from the loop's own records:

* ``demand_rps``: the mean of the minute's observations of the model (the ticks that measured
  its load) of the requests that arrived (``store.arrivals``: a saturated engine's queue
  counts, so the minute is short);
* ``ready_replicas``: the fewest ready at any of them (those that served the whole minute, as
  simulate counts them), and ``per_replica_rps`` what one of them was credited with then (the
  observed capacity over the ready replicas; with none ready, the offline profile's);
* ``gpu_per_replica`` and ``gpu_product``: the model's best profile point on the products the
  node pools billed (the live loop's replica shape);
* ``gpus_billed`` and ``product_gpus_billed``: the mean over the minute's ticks of the GPUs the
  node pools billed (ready and provisioning nodes, as they reported them).

A minute without a tick that read the fleet, or a model the minute did not measure, has no row:
unknown, not zero.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from controlplane.domain.models import ProfilePoint
from controlplane.simulation.engine import MinuteRow

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


@dataclass(frozen=True, slots=True)
class Seen:
    """One observation of a model: its load and ready capacity at one tick."""

    model: str
    at: datetime
    demand_rps: float
    capacity_rps: float
    replicas_ready: int


def _minute(at: datetime) -> int:
    """The minute of ``at``, counted from the epoch."""
    return int(at.timestamp() // 60)


@dataclass(slots=True)
class _Minute:
    """One model's observations in one minute, folded: their demand's sum and count, and the
    one with the fewest replicas ready."""

    demand_sum_rps: float
    count: int
    fewest: Seen


def minute_rows(seen: Iterable[Seen], billed: Sequence[tuple[datetime, Mapping[str, int]]],
                shapes: Mapping[str, ProfilePoint]) -> tuple[MinuteRow, ...]:
    """The timeline rows (by minute, then model) of the observations ``seen`` of the models
    in ``shapes`` (their best points) and the GPUs billed per product at each tick. ``seen``
    is read once, folded minute by minute (a week of a large fleet is millions of rows)."""
    billed_by_minute: dict[int, list[Mapping[str, int]]] = defaultdict(list)
    for at, by_product in billed:
        billed_by_minute[_minute(at)].append(by_product)
    minutes: dict[tuple[int, str], _Minute] = {}
    for s in seen:
        if s.model not in shapes:
            continue
        key = (_minute(s.at), s.model)
        folded = minutes.get(key)
        if folded is None:
            minutes[key] = _Minute(s.demand_rps, 1, s)
            continue
        folded.demand_sum_rps += s.demand_rps
        folded.count += 1
        if s.replicas_ready < folded.fewest.replicas_ready:
            folded.fewest = s
    mean_billed = {minute: (datetime.fromtimestamp(minute * 60, UTC),
                            sum(sum(t.values()) for t in ticks) / len(ticks),
                            {p: sum(t.get(p, 0) for t in ticks) / len(ticks)
                             for p in {p for t in ticks for p in t}})
                   for minute, ticks in billed_by_minute.items()}
    shape = {m: (p.product, p.replica_gpu_share, p.replica_rps) for m, p in shapes.items()}
    rows = []
    for (minute, model), folded in sorted(minutes.items()):
        if minute not in mean_billed:
            continue
        minute_at, gpus_billed, product_gpus = mean_billed[minute]
        product, gpu_share, profile_rps = shape[model]
        fewest = folded.fewest
        credited_rps = (fewest.capacity_rps / fewest.replicas_ready
                        if fewest.replicas_ready else 0.0)
        rows.append(MinuteRow(
            minute_at, model, folded.demand_sum_rps / folded.count, fewest.replicas_ready, 0,
            credited_rps if credited_rps > 0 else profile_rps, gpu_share, gpus_billed, product,
            product_gpus.get(product, 0.0)))
    return tuple(rows)


def read_recorded(engine: Engine, models: Collection[str] | None, since_at: datetime,
                  until_at: datetime) -> tuple[MinuteRow, ...]:
    """``minute_rows`` of the observations and the ticks that read the fleet in [since, until)
    of the models table's ``models`` (None: all of them), each shaped by its best point on the
    products billed then."""
    from sqlalchemy import or_, select

    from controlplane.cost_reader import table, tick_facts
    from controlplane.store.arrivals import arrived_in
    from controlplane.store.model_digest import model_specs_digested
    from controlplane.store.utc import as_utc

    specs = [s for s in model_specs_digested(engine)[1] if models is None or s.name in models]
    observations, ticks = table("observations"), table("ticks")
    with engine.connect() as connection:
        tick_times = dict(connection.execute(
            select(ticks.c.id, ticks.c.started_at)
            .where(ticks.c.started_at >= since_at, ticks.c.started_at < until_at,
                   or_(ticks.c.synced.is_(None), ticks.c.synced.is_(True)))).tuples().all())
    facts = tick_facts(engine, tick_times, loads=False)
    billed = [(as_utc(tick_times[i]), f.billed_gpus) for i, f in facts.items()]
    products = {p for _, by_product in billed for p in by_product}
    with engine.connect() as connection:
        rows = connection.execution_options(stream_results=True, yield_per=10_000).execute(
            select(observations.c.model, observations.c.at,
                   arrived_in(engine),
                   observations.c.capacity_rps, observations.c.replicas_ready)
            .where(observations.c.at >= since_at, observations.c.at < until_at,
                   observations.c.model.in_([s.name for s in specs])))
        return minute_rows((Seen(str(m), as_utc(at), float(d), float(c), int(r))
                            for m, at, d, c, r in rows),
                           billed, {s.name: s.best_point(products) for s in specs})
