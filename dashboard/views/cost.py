"""Cost: showback per tenant and model; idle vs warm vs serving; daily totals; CSV export."""

from __future__ import annotations

from datetime import timedelta

import altair as alt
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from controlplane.domain import cost_gaps
from controlplane.domain.cost import cost_per_million, window_bounds
from controlplane.settings import load_inherited_settings
from dashboard import costing, history, widgets
from dashboard.context import store_url

WINDOWS = {"24 h": timedelta(hours=24), "7 d": timedelta(days=7)}
CATEGORY_COLOURS = alt.Scale(domain=["serving", "warm", "idle"],
                             range=["#54a24b", "#f58518", "#bab0ac"])


def showback(accruals: pd.DataFrame, served: pd.DataFrame, key: str) -> pd.DataFrame:
    serving = accruals[accruals["category"] == "serving"]
    frame = serving.groupby(key, as_index=False).agg(usd=("usd", "sum"),
                                                     gpu_hours=("gpu_hours", "sum"))
    if key == "model":
        frame = frame.merge(served[["model", "served_requests"]], on="model", how="left")
        frame["$ per 1M requests"] = [cost_per_million(u, r) if pd.notna(r) else None
                                      for u, r in zip(frame["usd"], frame["served_requests"],
                                                      strict=True)]
    total = float(frame["usd"].sum())
    frame["share %"] = 100 * frame["usd"] / total if total else 0.0
    return frame.sort_values("usd", ascending=False).round(3)


def main() -> None:
    url = store_url()
    tick = widgets.require_tick(url)
    widgets.store_clock(tick)
    window = WINDOWS[st.radio("Window", list(WINDOWS), index=1, horizontal=True)]
    since_at, until_at = window_bounds(tick.first_at, tick.started_at, window)
    gap_limit_s = cost_gaps.gap_limit_s(load_inherited_settings().reconcile.interval_s)
    window_cost = costing.cost_window(url, since_at, until_at, gap_limit_s=gap_limit_s)
    rates, accruals, served = window_cost.rates, window_cost.accruals, window_cost.requests
    if since_at == until_at:
        st.info("Only one reconcile tick so far: cost accrues from one tick to the next, so it "
                "shows after the next tick.")
        return
    if not window_cost.samples:
        st.info("No plan in this window yet.")
        return
    if accruals.empty:  # plans were in force, but every pool was at zero nodes: $0, not "no plan"
        st.info("No GPU was billed in this window: the plans in force had no ready or "
                "provisioning node in any pool.")
    if window_cost.unrecorded:
        st.warning(f"No plan was recorded {cost_gaps.spans_text(window_cost.unrecorded)}, e.g. "
                   "while the control plane was down: the cost shown there holds the plan in "
                   "force before, unmeasured. The CSV marks each day's such hours in its "
                   "UnrecordedHours column.")
    total = float(accruals["usd"].sum())
    by_cat = accruals.groupby("category")["usd"].sum()
    cols = st.columns(5)
    cols[0].metric("Total", widgets.usd(total),
                   f"{(until_at - since_at) / timedelta(hours=1):.1f} h", **widgets.INFO_DELTA)
    for col, category in zip(cols[1:4], ("serving", "warm", "idle"), strict=True):
        value = float(by_cat.get(category, 0.0))
        col.metric(category.capitalize(), widgets.usd(value),
                   f"{100 * value / total:.1f}%" if total else None, **widgets.INFO_DELTA)
    cols[4].metric("$ per 1M requests", widgets.usd(cost_per_million(
        total, float(served["served_requests"].sum()))), help="all dollars / requests served")
    held = (f"Each plan recorded ({window_cost.samples:,} in this window) is held from its "
            "tick until the next" if window_cost.step_s is None else
            f"The plan in force is sampled every {widgets.span_text(window_cost.step_s)} "
            f"({window_cost.samples:,} samples: this window's plans place more GPUs than the "
            "page reads plan by plan) and held until the next sample, so a plan between two "
            "samples is missed; the export without --step-s holds every plan")
    st.caption(f"{costing.CONVENTION} {held}, priced as in force at each instant (a price "
               "change bills from its exact time); requests are counted from the load "
               "observations, per UTC day. `headroom cost export --out showback.csv "
               f"{' '.join(costing.export_args(until_at, window, window_cost.step_s))}` (with "
               "this dashboard's --db or --config) exports this window with the same figures.")

    left, right = st.columns(2)
    if accruals.empty:  # no chart of nothing (Altair cannot type an empty column)
        left.subheader("$ / h over time")
        left.caption("Nothing billed in this window.")
        right.subheader("Daily totals")
        right.caption("Nothing billed in this window.")
    else:
        _charts(left, right, rates, accruals)

    tenants, models = st.columns([2, 3])
    with tenants:
        st.subheader("Showback per tenant")
        st.dataframe(showback(accruals, served, "tenant"), hide_index=True, width="stretch")
    with models:
        st.subheader("Showback per model")
        st.dataframe(showback(accruals, served, "model"), hide_index=True, width="stretch",
                     height=300)
    st.download_button(
        "Download showback CSV (OpenCost allocation layout)",
        data=lambda: costing.export_csv(url, accruals, since_at, until_at,
                                        window_cost.unrecorded),
        file_name=f"headroom-showback-{since_at:%Y%m%d}-{until_at:%Y%m%d}.csv",
        mime="text/csv")
    st.subheader("GPU prices")
    widgets.price_sources(history.prices(url), sorted(set(accruals["product"])))


def _charts(left: DeltaGenerator, right: DeltaGenerator, rates: pd.DataFrame,
            accruals: pd.DataFrame) -> None:
    with left:
        st.subheader("$ / h over time")
        st.altair_chart(alt.Chart(rates).mark_area(interpolate="step-after").encode(
            x=widgets.time_x(), y=alt.Y("usd_per_hour:Q", title="$ / h", stack=True),
            color=alt.Color("category:N", scale=CATEGORY_COLOURS)).properties(height=240),
            width="stretch")
    with right:
        st.subheader("Daily totals")
        daily = accruals.groupby(["day", "category"], as_index=False)["usd"].sum()
        st.altair_chart(alt.Chart(daily).mark_bar().encode(
            x=alt.X("day:N", title="day (UTC)"), y=alt.Y("usd:Q", title="$"),
            color=alt.Color("category:N", scale=CATEGORY_COLOURS),
            tooltip=["day", "category", alt.Tooltip("usd:Q", format=",.2f")])
            .properties(height=240), width="stretch")


started = widgets.page_timer()
st.title("Cost")
main()
widgets.footer(started)
