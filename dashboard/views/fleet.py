"""Fleet: every GPU with its product and layout; MIG slices drawn to scale, coloured by model,
MPS and time-slice shares split evenly; the MIG re-layouts in flight and what they wait on; the
workloads bound through the placement API."""

from __future__ import annotations

import re

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import queries as q
from dashboard import widgets
from dashboard.context import store_url
from dashboard.layout import Placed, gpu_rects
from dashboard.markdown import escape_markdown

GPUS_PER_PAGE = 40
LEGEND_MAX_MODELS = 24


def natural_key(gpu_id: str) -> tuple[tuple[int, int, str], ...]:
    """A100-80GB/2 before A100-80GB/10 (numbers compare as numbers, text as text)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", gpu_id))


def layout_frame(placements: pd.DataFrame) -> pd.DataFrame:
    rows: list[dict[str, object]] = []
    for (gpu_id, product), group in placements.groupby(["gpu_id", "product"], sort=False):
        segments = [Placed(r.model, r.mode, r.mig_profile, int(r.mig_start),
                           int(r.compute_slices), int(r.gpus), int(r.gpu_index))
                    for r in group.itertuples(index=False)]
        rows.extend({"gpu": gpu_id, "product": product, "model": rect.model, "x0": rect.x0,
                     "x1": rect.x1, "slice": rect.label,
                     "share": f"{100 * (rect.x1 - rect.x0):.0f}% of the GPU"}
                    for rect in gpu_rects(str(product), segments))
    return pd.DataFrame(rows, columns=["gpu", "product", "model", "x0", "x1", "slice", "share"])


def layout_chart(rects: pd.DataFrame, order: list[str], show_legend: bool) -> alt.LayerChart:
    legend = alt.Legend(title="model", orient="right") if show_legend else None
    base = alt.Chart(rects).encode(y=alt.Y("gpu:N", sort=order, title=None,
                                           scale=alt.Scale(paddingInner=0.25)))
    bars = base.mark_bar(stroke="white", strokeWidth=1.5).encode(
        x=alt.X("x0:Q", scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(values=[i / 8 for i in range(9)], labelExpr="round(datum.value * 8)",
                              title="memory slice (MIG placement axis; 8 = the whole GPU)")),
        x2="x1:Q", color=alt.Color("model:N", legend=legend, scale=alt.Scale(scheme="tableau20")),
        tooltip=["gpu", "product", "model", "slice", "share"])
    text = base.mark_text(align="left", dx=3, color="white", fontSize=10).encode(
        x="x0:Q", text="slice:N")
    chart: alt.LayerChart = (bars + text).properties(height=alt.Step(28))
    return chart


def main() -> None:
    url = store_url()
    tick = widgets.require_tick(url)
    widgets.store_clock(tick)
    widgets.fleet_unread(tick)
    plan = q.latest_plan(url)
    inventory = q.inventory(url)
    placements = (q.plan_placements(url, plan.plan_id) if plan is not None
                  else q.plan_placements(url, -1))
    placed = placements.groupby("product")["gpu_id"].nunique()
    ready = inventory[inventory["ready"].fillna(False).astype(bool)].groupby("product").size()
    summary = pd.DataFrame({
        "billed GPUs": pd.Series(tick.billed_gpus, dtype="int64"),
        "ready GPUs": ready, "GPUs in plan": placed}).fillna(0).astype(int)
    summary["idle ready GPUs"] = (summary["ready GPUs"] - summary["GPUs in plan"]).clip(lower=0)
    cols = st.columns(len(summary) or 1)
    for col, (product, row) in zip(cols, summary.iterrows(), strict=False):
        col.metric(escape_markdown(str(product)),
                   f"{row['GPUs in plan']} / {row['ready GPUs']} in use",
                   f"{row['idle ready GPUs']} idle", **widgets.INFO_DELTA)
    st.dataframe(summary.rename_axis("GPU product").reset_index(), hide_index=True)

    st.subheader("Planned layouts")
    if plan is None or placements.empty:
        st.info("The newest plan places nothing yet.")
    else:
        st.caption(f"Plan revision {plan.revision} at {plan.created_at:%Y-%m-%d %H:%M:%S} UTC"
                   f"{' (dry run)' if plan.dry_run else ''}: {plan.gpus_placed} GPUs placed, "
                   f"{plan.warm_gpus} warm. MIG instances sit at their memory-slice start; "
                   "MPS/time-slice replicas split their GPU (or slice) evenly.")
        products = sorted(placements["product"].unique())
        left, right = st.columns([2, 3])
        # keyed: a new plan that adds or drops a product, or a page, would otherwise make new
        # widgets and jump back to the first product's first page
        product = left.selectbox("GPU product", products, index=0, key="fleet_product")
        gpu_ids = sorted(set(placements.loc[placements["product"] == product, "gpu_id"]),
                         key=natural_key)
        pages = max(1, -(-len(gpu_ids) // GPUS_PER_PAGE))
        page = right.number_input(f"page (of {pages}, {GPUS_PER_PAGE} GPUs each)", 1, pages, 1,
                                  key=f"fleet_page_{product}")
        shown = gpu_ids[(page - 1) * GPUS_PER_PAGE: page * GPUS_PER_PAGE]
        rects = layout_frame(placements[placements["gpu_id"].isin(shown)])
        st.altair_chart(layout_chart(rects, shown, rects["model"].nunique() <= LEGEND_MAX_MODELS),
                        width="stretch")
    if plan is not None and plan.unplaced:
        st.warning("Unplaced: " + "; ".join(map(escape_markdown, plan.unplaced)))

    st.subheader("MIG re-layouts in flight")
    relayouts = q.relayouts_in_flight(url)
    if relayouts.empty:
        st.caption("No MIG re-layout in flight.")
    else:
        st.dataframe(relayouts, hide_index=True, width="stretch")
        for r in relayouts[relayouts["waiting on"] != ""].itertuples(index=False):
            st.warning(escape_markdown(f"Re-layout of node {r.node} ({r[3]} → {r[4]}, "
                                       f"{r.phase}) waits: {r[8]}"))

    st.subheader("Placement API bindings")
    bindings = q.placement_bindings(url)
    if bindings.empty:
        st.caption("No workload is bound through the placement API (Place) on this store.")
    else:
        st.caption(f"{len(bindings)} workload(s) on {bindings['node'].nunique()} node(s), "
                   "bound by serving layers through Place: the placement journal every "
                   "placement server on this store follows.")
        st.dataframe(bindings, hide_index=True, width="stretch")

    st.subheader("Inventory (observed)")
    st.dataframe(inventory, hide_index=True, width="stretch", height=320)


started = widgets.page_timer()
st.title("Fleet")
main()
widgets.footer(started)
