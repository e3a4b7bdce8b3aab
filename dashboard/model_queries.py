"""Read models of one model's series over the store, cached with a TTL (``st.cache_data``): its
observations (load, capacity, replicas, serving signals) and its forecasts, and each model's
newest forecast with its notes (what was done to its history on the way: migration 0023; a store
older than it has none); and every model's minutes as the loop recorded them, as a timeline."""

from __future__ import annotations

import json
from datetime import datetime

import pandas as pd
import streamlit as st
from sqlalchemy import and_, func, select

from controlplane.cost_reader import table
from controlplane.recorded_timeline import read_recorded
from controlplane.simulation.timeline import timeline_text
from controlplane.store.arrivals import arrived_in
from controlplane.store.codec import notes_from_json
from controlplane.store.stored_columns import columns_or_null
from dashboard.context import TTL_S, engine_for, read_frame, utc_columns

#: the serving signals of ``model_history`` a store may be too old to hold (None there): the
#: queue and KV cache came with migration 0027
SIGNAL_COLUMNS = ["latency_ms", "queued_requests", "kv_cache_usage"]


@st.cache_data(ttl=TTL_S, show_spinner=False)
def model_history(url: str, model: str, since_at: datetime, until_at: datetime) -> pd.DataFrame:
    """One model's observations in the window, oldest first: its load (``demand_rps``: the
    requests that arrived, ``store.arrivals``), ready capacity and replicas, and the serving
    signals read then (None: not measured)."""
    o = table("observations")
    cols = ["at", "demand_rps", "capacity_rps", "replicas_ready"]
    signals = columns_or_null(engine_for(url), o, SIGNAL_COLUMNS)
    load = (o.c.at, arrived_in(engine_for(url)), o.c.capacity_rps, o.c.replicas_ready)
    query = (select(*load, *signals)
             .where(and_(o.c.model == model, o.c.at >= since_at, o.c.at <= until_at))
             .order_by(o.c.at))
    return utc_columns(read_frame(url, query, cols + SIGNAL_COLUMNS), "at")


@st.cache_data(ttl=TTL_S, show_spinner=False)
def forecast_history(url: str, model: str, since_at: datetime, until_at: datetime
                     ) -> pd.DataFrame:
    """Forecasts of one model computed in the window (p50/p90 as lists per row)."""
    f = table("forecasts")
    cols = ["computed_at", "origin_at", "step_s", "p50_json", "p90_json", "method",
            "fallback_reason", "backtest_wape"]
    query = (select(*(f.c[c] for c in cols))
             .where(and_(f.c.model == model, f.c.computed_at >= since_at,
                         f.c.computed_at <= until_at))
             .order_by(f.c.computed_at))
    frame = utc_columns(read_frame(url, query, cols), "computed_at", "origin_at")
    frame["p50"] = [json.loads(v) for v in frame.pop("p50_json")]
    frame["p90"] = [json.loads(v) for v in frame.pop("p90_json")]
    return frame


@st.cache_data(ttl=TTL_S, show_spinner=False)
def latest_forecast_meta(url: str) -> pd.DataFrame:
    """Method, fallback reason, backtest WAPE and notes (a tuple of lines, empty when nothing
    was noted) of each model's newest forecast."""
    f = table("forecasts")
    newest = select(func.max(f.c.id).label("id")).group_by(f.c.model).subquery()
    cols = ["model", "computed_at", "method", "fallback_reason", "backtest_wape"]
    notes = columns_or_null(engine_for(url), f, ["notes_json"])
    query = select(*(f.c[c] for c in cols), *notes).join(newest, newest.c.id == f.c.id)
    frame = utc_columns(read_frame(url, query, [*cols, "notes_json"]), "computed_at")
    # NULL (nothing noted) reaches the frame as None or NaN
    frame["notes"] = [notes_from_json(v if isinstance(v, str) else None)
                      for v in frame.pop("notes_json")]
    return frame


@st.cache_data(ttl=TTL_S, show_spinner=False)
def recorded_timeline(url: str, since_at: datetime, until_at: datetime) -> str:
    """What the loop did over [since, until), as ``headroom trace timeline`` writes it ("": no
    tick that read the fleet then)."""
    rows = read_recorded(engine_for(url), None, since_at, until_at)
    return timeline_text(rows) if rows else ""
