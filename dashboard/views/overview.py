"""Overview: fleet GPU utilization, $/h now, cost per 1M requests, SLO status, last tick (its
notes, its writer), the paused models."""

from __future__ import annotations

import math
from datetime import timedelta

import altair as alt
import pandas as pd
import streamlit as st

from controlplane.domain import cost_gaps
from controlplane.domain.cost import cost_per_million
from controlplane.domain.slo import slo_status
from controlplane.settings import load_inherited_settings
from dashboard import costing, history, widgets
from dashboard import queries as q
from dashboard.context import TTL_S, reads_store, store_url
from dashboard.markdown import escape_markdown

WINDOW = timedelta(hours=24)


def gpus_by_product(tick: q.LastTick, lines: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for product in sorted(set(tick.billed_gpus) | set(lines["product"])):
        mine = lines[lines["product"] == product]
        by_cat = mine.groupby("category")["gpus"].sum()
        rows.append({"product": product, "billed": tick.billed_gpus.get(product, 0),
                     "serving": round(float(by_cat.get("serving", 0.0)), 2),
                     "warm": round(float(by_cat.get("warm", 0.0)), 2),
                     "idle": round(float(by_cat.get("idle", 0.0)), 2),
                     "$ / h": round(float(mine["usd_per_hour"].sum()), 2)})
    return pd.DataFrame(rows)


# short headers, so six columns fit the right two-fifths of a 1440-px page; the units in the help
GPUS_BY_PRODUCT_HELP = {
    "product": st.column_config.TextColumn("product", help="GPU product"),
    "billed": st.column_config.NumberColumn("billed", help="GPUs billed (ready + provisioning)"),
    "serving": st.column_config.NumberColumn(
        "serving", help="GPU-equivalents held by serving replicas"),
    "warm": st.column_config.NumberColumn("warm", help="GPU-equivalents held as warm pool"),
    "idle": st.column_config.NumberColumn("idle", help="GPU-equivalents billed and unused"),
    "$ / h": st.column_config.NumberColumn("$ / h", help="dollars per hour now", format="%.2f"),
}
SLO_HELP = {
    "model": st.column_config.TextColumn("model", pinned=True),
    "status": st.column_config.TextColumn("status", width=50),
    "demand_rps": st.column_config.NumberColumn(
        "demand", help="requests / s that arrived: those that finished plus how fast those "
        "its replicas hold (queued, running) grew, where the engine reports them"),
    "capacity_rps": st.column_config.NumberColumn(
        "capacity", help="requests / s the ready replicas serve within their SLO"),
    "replicas_ready": st.column_config.NumberColumn("ready", help="replicas ready", width=50),
    "unscheduled": st.column_config.NumberColumn(
        "unscheduled", help="its pods no node has bound as the last tick read them (Pending: "
        "waiting for room or for a node; None: not read); shown while some model has any",
        width=50),
    "queued": st.column_config.NumberColumn(
        "queued", help="requests waiting in its queues as the last tick read them (None: not "
        "read); over 30 s of its capacity counts as short", width=50),
    "kv_cache_pct": st.column_config.NumberColumn(
        "kv %", help="% of its KV cache in use as the last tick read it (vLLM, SGLang; None: not "
        "read); over 95 % counts as short", width=50),
    "latency_ms": st.column_config.NumberColumn(
        "latency", help="ms as the last tick read it (the reconcile's latency statistic; None: "
        "not read); above the models file's SLO counts as short", width=50),
    "short % (1 h)": st.column_config.NumberColumn(
        "short %", help="share of the last hour's observations that were short as the status "
                        "reads it: capacity below demand, a queue over 30 s of capacity, a "
                        "KV cache over 95 % full (those two where stored) or a latency above "
                        "the SLO"),
}


def slo_table(url: str, tick: q.LastTick) -> pd.DataFrame:
    read_at = tick.observed_through
    latest = q.latest_observations(url, read_at)
    last_hour = history.shortfalls(url, read_at - timedelta(hours=1), read_at)
    frame = latest.merge(last_hour, on="model", how="left").fillna({"short_observations": 0,
                                                                    "observations": 0})
    frame["queued"] = [tick.queued.get(str(model), math.nan) for model in frame["model"]]
    kv_cache = [tick.kv_cache_usage.get(str(model), math.nan) for model in frame["model"]]
    frame["kv_cache_pct"] = [100 * usage for usage in kv_cache]
    frame["unscheduled"] = [tick.unscheduled.get(str(model), math.nan) for model in frame["model"]]
    frame["latency_ms"] = frame["latency_ms"].astype(float)  # all None: not read, NaN
    listed = q.models(url)
    slo_ms = dict(zip(listed["name"], listed["latency_slo_ms"], strict=True))
    # a model not listed has no SLO: its latency is not short
    frame["latency_slo_ms"] = [slo_ms.get(str(model), math.nan) for model in frame["model"]]
    frame["status"] = [slo_status(*read) for read in zip(
        frame["demand_rps"], frame["capacity_rps"], frame["queued"], kv_cache,
        frame["latency_ms"], frame["latency_slo_ms"], strict=True)]
    frame["short % (1 h)"] = (100 * frame["short_observations"]
                              / frame["observations"].where(frame["observations"] > 0)).round(1)
    # the signal columns only where they are read (queue: Kubernetes with a metric preset; KV
    # cache: vLLM's or SGLang's; latency: the simulator's, a latency query's; pods no node
    # bound: while a model has any), so the table keeps to its column of the page elsewhere
    signals = [c for c, read in (("unscheduled", any(tick.unscheduled.values())),
                                 ("queued", bool(tick.queued)),
                                 ("kv_cache_pct", bool(tick.kv_cache_usage)),
                                 ("latency_ms", frame["latency_ms"].notna().any())) if read]
    return frame[["model", "status", "demand_rps", "capacity_rps", "replicas_ready", *signals,
                  "short % (1 h)"]].round(1)


def load_on_capacity(demand_rps: float, capacity_rps: float) -> str:
    """Fleet demand as a share of ready capacity; demand with nothing ready is said, not n/a."""
    if not (math.isfinite(demand_rps) and math.isfinite(capacity_rps)):
        return "n/a"
    if capacity_rps > 0:
        return f"{100 * demand_rps / capacity_rps:.0f}%"
    return "no capacity ready" if demand_rps > 0 else "n/a"


def slo_summary(slo: pd.DataFrame) -> tuple[str, str]:
    """The SLO metric's value and note. No load observed recently is no verdict, not "all ok"."""
    if slo.empty:
        return "n/a", "no load observed in the last 10 min"
    shorts = int((slo["status"] == "short").sum())
    unknown = int((slo["status"] == "unknown").sum())
    value = f"{shorts} short" if shorts else f"{unknown} unknown" if unknown else "all ok"
    return value, f"{len(slo)} models with load in the last 10 min"


@st.fragment(run_every=TTL_S)
@reads_store
def overview() -> None:
    url = store_url()
    tick = widgets.require_tick(url, refreshes=True)  # a fragment with run_every
    lines = costing.cost_now(url)
    since_at = max(tick.first_at, tick.started_at - WINDOW)
    gap_limit_s = cost_gaps.gap_limit_s(load_inherited_settings().reconcile.interval_s)
    window_cost = costing.cost_window(url, since_at, tick.started_at,
                                     gap_limit_s=gap_limit_s)
    accruals, served = window_cost.accruals, window_cost.requests
    slo = slo_table(url, tick)

    serving = float(lines.loc[lines["category"] == "serving", "gpus"].sum())
    billed = sum(tick.billed_gpus.values())
    per_million = cost_per_million(float(accruals["usd"].sum()),
                                   float(served["served_requests"].sum()))
    planned = q.latest_plan(url) is not None  # cost lines and allocation come from a plan
    if not planned:
        reason = f" ({escape_markdown(tick.reason)})" if tick.reason else ""
        st.info(f"No plan recorded yet: {tick.ticks:,} tick(s) so far, the newest "
                f"{tick.status}{reason}. GPU allocation and "
                "$ / h show once a tick records a plan.")
    if window_cost.unrecorded:
        st.warning(f"No plan was recorded {cost_gaps.spans_text(window_cost.unrecorded)}, e.g. "
                   "while the control plane was down: $ per 1M requests holds the plan in force "
                   "before through it, unmeasured.")
    cols = st.columns(6)
    cols[0].metric("GPU allocation",
                   f"{100 * serving / billed:.0f}%" if billed and planned else "n/a",
                   help="GPU-equivalents held by serving replicas / GPUs billed")
    seen = "" if tick.read_the_fleet else f", as tick #{tick.fleet_tick_id} saw the fleet"
    cols[1].metric("Load on capacity", load_on_capacity(tick.demand_rps, tick.capacity_rps),
                   help="demand / ready capacity of the models whose load was measured" + seen)
    cols[2].metric("$ / h now", widgets.usd(float(lines["usd_per_hour"].sum()) if planned
                                            else None),
                   help=f"{billed} GPUs billed (ready + provisioning){seen}")
    cols[3].metric("$ per 1M requests", widgets.usd(per_million),
                   help=f"last {widgets.span_text((tick.started_at - since_at).total_seconds())}"
                        ": all GPU dollars (idle and warm included) / requests served")
    cols[4].metric("SLO status", *slo_summary(slo), **widgets.INFO_DELTA,
                   help="models short now: ready capacity below demand, a queue over 30 s of "
                        "capacity, a KV cache over 95 % full or a latency above the SLO")
    # the zone in the label: "18:12:30 UTC" is cut to "18:12:3…" in a sixth of a 1440-px page
    cols[5].metric("Last tick (UTC)", f"{tick.started_at:%H:%M:%S}", f"{tick.status} {tick.reason}",
                   **widgets.INFO_DELTA, help=widgets.age_text(tick.started_at))
    widgets.fleet_paused(url)
    widgets.store_clock(tick)
    widgets.fleet_unread(tick)
    widgets.tick_writers(url, tick)
    widgets.tick_notes(tick)
    widgets.paused_models(url)

    # the tables' column takes 4/9 of the page, and more for each signal column the SLO table
    # has (queue, KV cache: ticks that read them, Kubernetes with a metric preset; latency:
    # the simulator's and any latency query's; unscheduled: while a model has pods unbound), so
    # it fits a 1440-px page; past three it takes two thirds, as much as the chart can give
    read = len([c for c in ("queued", "kv_cache_pct", "latency_ms", "unscheduled")
                if c in slo.columns])
    left, right = st.columns(([5, 4], [1, 1], [2, 3], [1, 2])[min(read, 3)])
    with left:
        st.subheader("Fleet over the last 24 h")
        timeline = history.fleet_timeline(url, since_at, tick.started_at)
        long = timeline.melt(id_vars="at", value_vars=["demand_rps", "capacity_rps"],
                             var_name="series", value_name="rps")
        st.altair_chart(alt.Chart(long).mark_line().encode(
            x=widgets.time_x(), y=alt.Y("rps:Q", title="requests / s"),
            color=alt.Color("series:N", title=None)).properties(height=220), width="stretch")
        gpus = timeline.melt(id_vars="at", value_vars=["gpus_ready", "gpus_placed", "warm_gpus"],
                             var_name="series", value_name="gpus")
        st.altair_chart(alt.Chart(gpus).mark_line(interpolate="step-after").encode(
            x=widgets.time_x(), y=alt.Y("gpus:Q", title="GPUs"),
            color=alt.Color("series:N", title=None)).properties(height=180), width="stretch")
    with right:
        st.subheader("GPUs by product")
        st.dataframe(gpus_by_product(tick, lines), hide_index=True, width="stretch",
                     column_config=GPUS_BY_PRODUCT_HELP)
        st.subheader("SLO status")
        st.dataframe(slo.sort_values(["status", "short % (1 h)"], ascending=[False, False]),
                     hide_index=True, width="stretch", column_config=SLO_HELP)


started = widgets.page_timer()
st.title("Overview")
overview()
widgets.footer(started)
