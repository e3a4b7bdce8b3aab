"""Read models over the store's record, cached with a TTL (``st.cache_data``) as ``queries``'
are: the fleet's totals tick by tick, the configured and historical GPU prices, the requests
each model was asked for and served and its observations short of its SLO, and the plans with
their actions and the ticks' outcomes (the Overview's and Models' charts, the Cost and Decisions
pages). Every function takes the store URL first; times are UTC."""

from __future__ import annotations

import math
from datetime import datetime

import pandas as pd
import streamlit as st
from sqlalchemy import and_, func, select

from controlplane import cost_reader
from controlplane.cost_reader import table
from controlplane.domain.cost import GpuPrice, PriceTable
from controlplane.domain.price_history import PriceHistory
from controlplane.store.status_reader import read_the_fleet
from dashboard.context import TTL_S, engine_for, read_frame, utc_columns

#: the fleet totals of a tick, missing (NaN: a chart's line breaks) when it could not read it
FLEET_TOTALS = ["gpus_ready", "demand_rps", "capacity_rps"]


@st.cache_data(ttl=TTL_S, show_spinner=False)
def fleet_timeline(url: str, since_at: datetime, until_at: datetime) -> pd.DataFrame:
    """Per tick: status, GPUs ready, fleet demand and capacity (missing for a tick that could
    not read the fleet: it recorded 0 for each), the plan's placed and warm GPUs."""
    t, p = table("ticks"), table("plans")
    engine = engine_for(url)
    cols = ["at", "status", "read_the_fleet", *FLEET_TOTALS, "gpus_placed", "warm_gpus"]
    query = (select(t.c.started_at, t.c.status,
                    read_the_fleet(engine),
                    *(t.c[c] for c in FLEET_TOTALS), p.c.gpus_placed, p.c.warm_gpus)
             .select_from(t.join(p, p.c.tick_id == t.c.id, isouter=True))
             .where(and_(t.c.started_at >= since_at, t.c.started_at <= until_at))
             .order_by(t.c.started_at))
    frame = utc_columns(read_frame(url, query, cols), "at")
    frame["read_the_fleet"] = frame["read_the_fleet"].astype(bool)
    frame[FLEET_TOTALS] = frame[FLEET_TOTALS].astype(float)
    frame.loc[~frame["read_the_fleet"], FLEET_TOTALS] = math.nan
    return frame


@st.cache_data(ttl=TTL_S, show_spinner=False)
def configured_prices(url: str) -> tuple[GpuPrice, ...]:
    return cost_reader.configured_prices(engine_for(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def prices(url: str) -> PriceTable:
    return cost_reader.price_table(engine_for(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def price_history(url: str) -> PriceHistory:
    return cost_reader.price_history(engine_for(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def served(url: str, since_at: datetime, until_at: datetime) -> pd.DataFrame:
    # every model observed, listed or not: one since removed from the models table served too
    result = cost_reader.served_requests(engine_for(url), None, since_at, until_at)
    return pd.DataFrame([(s.model, s.demand_requests, s.served_requests, s.observations)
                         for s in result.values()],
                        columns=["model", "demand_requests", "served_requests", "observations"])


@st.cache_data(ttl=TTL_S, show_spinner=False)
def shortfalls(url: str, since_at: datetime, through_at: datetime) -> pd.DataFrame:
    """Each model observed from ``since_at`` through ``through_at`` (listed or not): its
    observations and those short of its SLO as the Overview's status reads it (capacity below
    demand, a queue backlog, a full KV cache, a latency above the models table's SLO)."""
    result = cost_reader.shortfalls(engine_for(url), since_at, through_at)
    return pd.DataFrame([(s.model, s.observations, s.short_observations)
                         for s in result.values()],
                        columns=["model", "observations", "short_observations"])


@st.cache_data(ttl=TTL_S, show_spinner=False)
def recent_plans(url: str, limit: int, with_actions_only: bool, dry_run_only: bool
                 ) -> pd.DataFrame:
    """The newest plans with their tick's status, newest first."""
    p, t, a = table("plans"), table("ticks"), table("actions")
    query = (select(p.c.id, p.c.created_at, p.c.revision, p.c.dry_run, p.c.gpus_placed,
                    p.c.warm_gpus, p.c.unplaced_json, p.c.rendered, t.c.status, t.c.reason)
             .select_from(p.join(t, t.c.id == p.c.tick_id)))
    if with_actions_only:  # plans with at least one action that is not held back by a guard
        query = query.where(p.c.id.in_(select(a.c.plan_id).where(a.c.skipped.is_(False))))
    if dry_run_only:
        query = query.where(p.c.dry_run.is_(True))
    cols = ["plan_id", "created_at", "revision", "dry_run", "gpus_placed", "warm_gpus",
            "unplaced_json", "rendered", "status", "reason"]
    return utc_columns(read_frame(url, query.order_by(p.c.id.desc()).limit(limit), cols),
                       "created_at")


@st.cache_data(ttl=TTL_S, show_spinner=False)
def plan_actions(url: str, plan_ids: tuple[int, ...]) -> pd.DataFrame:
    """Actions of the given plans with their outcomes (skipped actions have none)."""
    a, o = table("actions"), table("outcomes")
    query = (select(a.c.plan_id, a.c.ordinal, a.c.kind, a.c.target, a.c.from_value,
                    a.c.to_value, a.c.reason, a.c.skipped, o.c.ok, o.c.retryable, o.c.message)
             .select_from(a.join(o, o.c.action_id == a.c.id, isouter=True))
             .where(a.c.plan_id.in_(list(plan_ids))).order_by(a.c.plan_id, a.c.ordinal))
    cols = ["plan_id", "ordinal", "kind", "target", "from_value", "to_value", "reason", "skipped",
            "ok", "retryable", "message"]
    return read_frame(url, query, cols)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def tick_outcomes(url: str, since_at: datetime, until_at: datetime) -> pd.DataFrame:
    """Ticks per status and reason in the window."""
    t = table("ticks")
    query = (select(t.c.status, t.c.reason, func.count())
             .where(and_(t.c.started_at >= since_at, t.c.started_at <= until_at))
             .group_by(t.c.status, t.c.reason))
    return read_frame(url, query, ["status", "reason", "ticks"])
