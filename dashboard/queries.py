"""Read models over the store, cached with a TTL (``st.cache_data``). Every function takes the
store URL first, so the cache is per store. Times are UTC; "now" on a page is the store's clock
(the newest tick), which is virtual time in the demo."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pandas as pd
import streamlit as st
from sqlalchemy import and_, func, inspect, select

from controlplane import cost_reader
from controlplane.cost_reader import as_utc, table
from controlplane.domain.fleet_pause import FleetPause
from controlplane.domain.fleet_status import UnrecordedTick
from controlplane.domain.hints import DemandHint
from controlplane.domain.tick_writers import LeadershipChange
from controlplane.store.arrivals import arrived_in
from controlplane.store.fleet_pause import fleet_pause as read_fleet_pause
from controlplane.store.guard_intent import unrecorded_tick
from controlplane.store.hints import hints_ending_after
from controlplane.store.placement_journal import PlacementBindingRecord, live_bindings
from controlplane.store.profiles import newest_profiles
from controlplane.store.relayout import MigRelayoutRecord
from controlplane.store.status_reader import fleet_seen, tick_leadership
from controlplane.store.stored_columns import columns_or_null
from dashboard.context import TTL_S, engine_for, read_frame, utc_columns


@dataclass(frozen=True, slots=True)
class LastTick:
    """The newest tick, and the fleet as the newest tick that could read it saw it
    (``headroom status``'s rule, ``status_reader.fleet_seen``): this tick's, or, when it could
    not read the fleet (the API unreachable, ...), an earlier one's, named by ``fleet_tick_id``.
    A tick that could not read the fleet records an empty snapshot: its own totals are 0."""

    tick_id: int
    started_at: datetime
    status: str
    reason: str
    gpus_ready: int  # of the fleet seen (0 when none was)
    # demand and the ready capacity serving it, of the models whose load was measured (NaN:
    # no fleet seen)
    demand_rps: float
    capacity_rps: float
    billed_gpus: dict[str, int]  # of the fleet seen, per product
    ticks: int
    first_at: datetime
    # the tick whose fleet the figures above are, and when it read it (None: no tick of the
    # lookback read it)
    fleet_tick_id: int | None
    fleet_at: datetime | None
    notes: tuple[str, ...] = ()  # what the tick noted (headroom status shows them too)
    # requests waiting in each model's queues in the fleet seen (models whose queue was read)
    queued: dict[str, float] = field(default_factory=dict)
    # the share of each model's KV cache in use in the fleet seen (models whose usage was read)
    kv_cache_usage: dict[str, float] = field(default_factory=dict)
    # each model's pods no node has bound in the fleet seen (models whose pods were read)
    unscheduled: dict[str, int] = field(default_factory=dict)

    @property
    def read_the_fleet(self) -> bool:
        return self.fleet_tick_id == self.tick_id

    @property
    def observed_through(self) -> datetime:
        """The newest time an observation of the store can have at this tick: its start, or
        when it read the fleet, later (on Kubernetes by the seconds the read took; the loop
        dates its observations then)."""
        return max(self.started_at, self.fleet_at or self.started_at)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def last_tick(url: str) -> LastTick | None:
    ticks = table("ticks")
    with engine_for(url).connect() as connection:
        row = connection.execute(select(
            ticks.c.id, ticks.c.started_at, ticks.c.status, ticks.c.reason, ticks.c.observed_json)
            .order_by(ticks.c.id.desc()).limit(1)).first()
        count, first_at = connection.execute(
            select(func.count(), func.min(ticks.c.started_at))).one()
        if row is None:
            return None
        seen = fleet_seen(connection, int(row[0]))
        fleet = None if seen is None else connection.execute(
            select(ticks.c.gpus_ready, ticks.c.demand_rps, ticks.c.observed_json)
            .where(ticks.c.id == seen[0])).one()
    notes = tuple(str(n) for n in (json.loads(row[4]) if row[4] else {}).get("notes", ()))
    # the demand as the tick recorded it (of the measured models) and the capacity of those
    demand_rps, capacity_rps = (math.nan, math.nan) if seen is None or fleet is None \
        else (float(fleet[1]), seen[1].measured_load_rps()[1])
    return LastTick(
        int(row[0]), as_utc(row[1]), str(row[2]), str(row[3]),
        0 if fleet is None else int(fleet[0]), demand_rps, capacity_rps,
        {} if fleet is None else cost_reader.facts_from_observed(fleet[2]).billed_gpus,
        int(count), as_utc(first_at), None if seen is None else seen[0],
        None if seen is None else as_utc(seen[1].synced_at), notes,
        {} if seen is None else {m.name: m.queued_requests for m in seen[1].models
                                 if m.queued_requests is not None},
        {} if seen is None else {m.name: m.kv_cache_usage for m in seen[1].models
                                 if m.kv_cache_usage is not None},
        {} if seen is None else {m.name: m.replicas_unscheduled for m in seen[1].models
                                 if m.replicas_unscheduled is not None})


@dataclass(frozen=True, slots=True)
class TickWriters:
    """Who wrote the newest tick (the leading replica; None: not recorded) and the newest
    change of writer before it (``headroom status``'s leadership change)."""

    writer: str | None
    change: LeadershipChange | None
    # a newer tick that saved only its guard intent (``headroom status``'s unrecorded tick)
    unrecorded: UnrecordedTick | None = None


@st.cache_data(ttl=TTL_S, show_spinner=False)
def tick_writers(url: str, tick_id: int) -> TickWriters:
    """The writer of tick ``tick_id`` (the newest) and the newest change of writer within the
    lookback before it; a store older than migration 0016 names no writer. And a newer tick
    that saved only its guard intent (migration 0017)."""
    engine = engine_for(url)
    schema = inspect(engine)
    with engine.connect() as connection:
        unrecorded = (unrecorded_tick(connection) if schema.has_table("guard_intents")
                      else None)
        if not any(c["name"] == "writer" for c in schema.get_columns("ticks")):
            return TickWriters(None, None, unrecorded)
        ticks = table("ticks")
        writer = connection.execute(select(ticks.c.writer).where(ticks.c.id == tick_id)
                                    ).scalar()
        change = tick_leadership(connection, tick_id)
    return TickWriters(None if writer is None else str(writer), change, unrecorded)


@dataclass(frozen=True, slots=True)
class PlanSummary:
    plan_id: int
    tick_id: int
    created_at: datetime
    revision: int
    dry_run: bool
    gpus_placed: int
    warm_gpus: int
    unplaced: tuple[str, ...]


@st.cache_data(ttl=TTL_S, show_spinner=False)
def latest_plan(url: str) -> PlanSummary | None:
    plans = table("plans")
    with engine_for(url).connect() as connection:
        row = connection.execute(select(
            plans.c.id, plans.c.tick_id, plans.c.created_at, plans.c.revision, plans.c.dry_run,
            plans.c.gpus_placed, plans.c.warm_gpus, plans.c.unplaced_json)
            .order_by(plans.c.id.desc()).limit(1)).first()
    if row is None:
        return None
    return PlanSummary(int(row[0]), int(row[1]), as_utc(row[2]), int(row[3]), bool(row[4]),
                       int(row[5]), int(row[6]), tuple(json.loads(row[7])))


@st.cache_data(ttl=3600, show_spinner=False)
def plan_placements(url: str, plan_id: int) -> pd.DataFrame:
    """Segments of one plan (plans never change once written, hence the long TTL)."""
    p = table("placements")
    cols = ["model", "gpu_id", "product", "mode", "mig_profile", "mig_start", "compute_slices",
            "throughput_rps", "gpus", "gpu_index"]
    return read_frame(url, select(*(p.c[c] for c in cols)).where(p.c.plan_id == plan_id)
                  .order_by(p.c.gpu_id, p.c.mig_start), cols)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def inventory(url: str) -> pd.DataFrame:
    gpus, nodes = table("gpus"), table("nodes")
    cols = ["node", "index", "product", "memory_mib", "mig_capable", "sharing", "mig_layout",
            "pool", "ready", "cordoned"]
    query = (select(gpus.c.node, gpus.c.index, gpus.c.product, gpus.c.memory_mib,
                    gpus.c.mig_capable, gpus.c.sharing, gpus.c.mig_layout, nodes.c.pool,
                    nodes.c.ready, nodes.c.cordoned)
             .select_from(gpus.join(nodes, nodes.c.name == gpus.c.node, isouter=True))
             .order_by(gpus.c.node, gpus.c.index))
    return read_frame(url, query, cols)


#: a model's replica bounds (the models file's min_replicas / max_replicas) and its pause
#: (``headroom models pause``): the models table's columns of migration 0022
CONTROL_COLUMNS = ["min_replicas", "max_replicas", "paused_replicas", "paused_at", "paused_by"]


@st.cache_data(ttl=TTL_S, show_spinner=False)
def models(url: str) -> pd.DataFrame:
    """Every listed model, with its replica bounds and pause (None: unset, not paused; a
    paused model has ``paused_at``, its ``paused_replicas`` None when held at the replicas
    observed each tick). A store older than migration 0022 has neither: all None. One query."""
    m = table("models")
    cols = ["name", "tenant", "isolation", "engine", "latency_slo_ms", "cold_start_p50_s",
            "cold_start_p90_s"]
    controls = columns_or_null(engine_for(url), m, CONTROL_COLUMNS)
    frame = read_frame(url, select(*(m.c[c] for c in cols), *controls).order_by(m.c.name),
                   cols + CONTROL_COLUMNS)
    return utc_columns(frame, "paused_at")


#: the columns of ``replica_changes``
REPLICA_CHANGE_COLUMNS = ["model", "replicas_from", "replicas_to", "replica_reason",
                          "changed_at", "dry_run", "ok"]


@st.cache_data(ttl=TTL_S, show_spinner=False)
def replica_changes(url: str, since_at: datetime) -> pd.DataFrame:
    """Each model's newest replica change (a ``set_replicas`` action, applied or a dry run's)
    of the plans made since ``since_at``: from and to, the replica target's reason (it names
    a bound, a pause, a GPU budget or pool cutting the demand or a demand hint) and when. A
    model with none has no row. One query for all models, over the plans in the window."""
    a, p, o = table("actions"), table("plans"), table("outcomes")
    first_plan = select(func.min(p.c.id)).where(p.c.created_at >= since_at).scalar_subquery()
    newest = (select(func.max(a.c.id).label("id"))
              .where(a.c.plan_id >= first_plan, a.c.kind == "set_replicas",
                     a.c.skipped.is_(False))
              .group_by(a.c.target).subquery())
    query = (select(a.c.target, a.c.from_value, a.c.to_value, a.c.reason, p.c.created_at,
                    p.c.dry_run, o.c.ok)
             .select_from(a.join(newest, newest.c.id == a.c.id)
                          .join(p, p.c.id == a.c.plan_id)
                          .join(o, o.c.action_id == a.c.id, isouter=True))
             .order_by(a.c.target))
    return utc_columns(read_frame(url, query, REPLICA_CHANGE_COLUMNS), "changed_at")


@st.cache_data(ttl=TTL_S, show_spinner=False)
def latest_observations(url: str, at: datetime) -> pd.DataFrame:
    """The newest observation per model within 10 minutes before ``at``: every model observed,
    listed or not (one removed from the models table keeps its last observations for those
    10 minutes: the loop stops observing it at its next tick, and ``headroom status`` lists
    it too until then). Its ``demand_rps`` is the requests that arrived (``store.arrivals``)."""
    o = table("observations")
    cols = ["model", "at", "demand_rps", "capacity_rps", "replicas_ready", "latency_ms"]
    arrived = arrived_in(engine_for(url))
    read = (arrived if c == "demand_rps" else o.c[c] for c in cols)
    frame = read_frame(url, select(*read).where(and_(
        o.c.at >= at - timedelta(minutes=10), o.c.at <= at)), cols)
    frame = utc_columns(frame, "at").sort_values("at")
    # the newest row as a whole (a groupby's last() takes each column's newest non-null value:
    # a latency the newest tick did not read would come from an older one)
    return frame.drop_duplicates("model", keep="last").sort_values("model", ignore_index=True)


PROFILE_COLUMNS = ["model", "offline_rps", "corrected_rps", "factor", "profile_reason"]


@st.cache_data(ttl=TTL_S, show_spinner=False)
def latest_profiles(url: str) -> pd.DataFrame:
    """Each model's throughput per replica the newest tick that recorded profiles sized with:
    offline, corrected from observed metrics, their ratio and the reason (none recorded: no
    rows)."""
    with engine_for(url).connect() as connection:
        rows = [(p.model, p.offline_rps, p.corrected_rps, p.factor, p.reason)
                for p in newest_profiles(connection)]
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


#: the columns of the Fleet page's table of workloads bound through the placement API
BINDING_COLUMNS = ["node", "GPUs", "workload", "model", "mode", "GPU share (milli)",
                   "MIG profile", "bound at", "lease runs out at"]


def placement_bindings(url: str) -> pd.DataFrame:
    """The workloads bound through the placement API (Place) by node: the placement journal
    every placement server on the store follows; none on a store migrated before it existed.
    Not cached: a Place shows at the next rerun."""
    with engine_for(url).connect() as connection:
        if not inspect(connection).has_table(PlacementBindingRecord.__tablename__):
            return pd.DataFrame(columns=BINDING_COLUMNS)
        bound = live_bindings(connection)
    return pd.DataFrame(
        [(b.node, ",".join(map(str, b.gpu_indices)), b.workload_id, b.model or None,
          b.mode.value if b.mode is not None else "cpu only", b.gpu_milli, b.mig_profile, at,
          datetime.fromtimestamp(b.lease_expires_at_s, UTC) if b.leased else None)
         for b, at in bound], columns=BINDING_COLUMNS)


#: the columns of the Fleet page's table of MIG re-layouts in flight
RELAYOUT_COLUMNS = ["node", "pool", "product", "from", "to", "phase", "started at", "deadline",
                    "waiting on"]


@st.cache_data(ttl=TTL_S, show_spinner=False)
def relayouts_in_flight(url: str) -> pd.DataFrame:
    """The MIG re-layouts in flight (``headroom status``'s), oldest first, with what each waits
    on: its alert, else its wait reason ("": none; e.g. ``gpu_daemon_pods: ...``, a user's GPU
    DaemonSet pod holding the node); none on a store migrated before they were stored."""
    with engine_for(url).connect() as connection:
        if not inspect(connection).has_table(MigRelayoutRecord.__tablename__):
            return pd.DataFrame(columns=RELAYOUT_COLUMNS)
        r = table(MigRelayoutRecord.__tablename__)
        rows = connection.execute(
            select(r.c.node, r.c.pool, r.c.product, r.c.from_config, r.c.to_config, r.c.phase,
                   r.c.started_at, r.c.deadline_at, r.c.alert, r.c.wait_reason)
            .where(r.c.active.is_(True)).order_by(r.c.started_at)).all()
    return pd.DataFrame(
        [(*row[:6], as_utc(row[6]), None if row[7] is None else as_utc(row[7]),
          str(row[8] or row[9])) for row in rows], columns=RELAYOUT_COLUMNS)


def hints_in_force(url: str, at: datetime) -> tuple[DemandHint, ...]:
    """The demand hints not ended at ``at`` (``headroom hint``), by start; none on a store
    migrated before they existed. Not cached: a hint just added shows at the next rerun."""
    with engine_for(url).connect() as connection:
        if not inspect(connection).has_table("demand_hints"):
            return ()
        return hints_ending_after(connection, at)


def fleet_pause(url: str) -> FleetPause | None:
    """The fleet's pause (``headroom fleet pause``), None when it is not paused or the store
    is older than it. Not cached: a pause just set shows at the next rerun."""
    with engine_for(url).connect() as connection:
        if not inspect(connection).has_table("fleet_pause"):
            return None
        return read_fleet_pause(connection)
