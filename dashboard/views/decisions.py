"""Decisions: plan diffs with reasons, action outcomes, dry-run plans."""

from __future__ import annotations

import json
from datetime import timedelta

import pandas as pd
import streamlit as st

from dashboard import history, widgets
from dashboard.context import TTL_S, reads_store, store_url
from dashboard.markdown import escape_markdown

UNITS = {"scale_node_pool": "nodes", "set_replicas": "replicas",
         "relayout_mig": "MIG instances", "apply_sharing": "clients per GPU"}


def action_rows(actions: pd.DataFrame) -> pd.DataFrame:
    """Actions as a diff: target from → to with the reason and what applying it did."""
    rows = []
    for r in actions.itertuples(index=False):
        if r.skipped:
            outcome = "held back by a guard"
        elif pd.isna(r.ok):
            outcome = "not applied (dry run)"
        else:
            outcome = ("ok" if r.ok else "failed, will retry" if r.retryable else "failed")
        rows.append({"action": "skip" if r.skipped else r.kind, "target": r.target,
                     "change": f"{r.from_value} → {r.to_value} {UNITS.get(r.kind, '')}".strip(),
                     "reason": r.reason, "outcome": outcome,
                     "message": "" if pd.isna(r.message) else r.message})
    return pd.DataFrame(rows, columns=["action", "target", "change", "reason", "outcome",
                                       "message"])


@st.fragment(run_every=TTL_S)
@reads_store
def decisions(limit: int, with_actions_only: bool, dry_run_only: bool) -> None:
    url = store_url()
    tick = widgets.require_tick(url, refreshes=True)  # a fragment with run_every
    widgets.store_clock(tick)
    statuses = history.tick_outcomes(url, tick.started_at - timedelta(hours=24), tick.started_at)
    cols = st.columns(4)
    for col, status in zip(cols, ("applied", "dry_run", "skipped", "failed"), strict=True):
        col.metric(f"Ticks {status.replace('_', '-')} (24 h)",
                   int(statuses.loc[statuses["status"] == status, "ticks"].sum()))
    skipped = statuses[(statuses["status"] != "applied") & (statuses["reason"] != "")]
    if not skipped.empty:
        st.dataframe(skipped, hide_index=True)

    plans = history.recent_plans(url, limit, with_actions_only, dry_run_only)
    if plans.empty:
        st.info("No plan matches these filters yet.")
        return
    actions = history.plan_actions(url, tuple(int(p) for p in plans["plan_id"]))
    st.subheader("Actions in these plans, newest first")
    flat = actions.merge(plans[["plan_id", "created_at"]], on="plan_id").sort_values(
        ["created_at", "ordinal"], ascending=[False, True])
    table = action_rows(flat)
    table.insert(0, "at (UTC)", list(flat["created_at"].dt.strftime("%m-%d %H:%M:%S")))
    st.dataframe(table, hide_index=True, width="stretch", height=260)
    st.subheader("Plan diffs")
    for index, plan in enumerate(plans.itertuples(index=False)):
        mine = actions[actions["plan_id"] == plan.plan_id]
        applied = int((~mine["skipped"].astype(bool)).sum())
        held = int(mine["skipped"].astype(bool).sum())
        failed = int((mine["ok"] == False).sum())  # noqa: E712  (NaN = no outcome)
        title = (f"{plan.created_at:%Y-%m-%d %H:%M:%S} UTC · revision {plan.revision} · "
                 f"{applied} action(s), {held} held back"
                 f"{f', {failed} failed' if failed else ''}"
                 f"{' · DRY RUN' if plan.dry_run else ''}")
        with st.expander(title, expanded=index == 0):
            st.code(plan.rendered or "(no change)", language=None)
            outcomes = action_rows(mine)["outcome"].value_counts()
            st.caption("Outcomes: " + (", ".join(f"{n} {o}" for o, n in outcomes.items())
                                       or "none"))
            unplaced = json.loads(plan.unplaced_json)
            reason = f" ({plan.reason})" if plan.reason else ""
            left = f"; unplaced: {'; '.join(unplaced)}" if unplaced else ""
            st.caption(escape_markdown(f"{plan.gpus_placed} GPUs placed, "
                                               f"{plan.warm_gpus} warm; tick status "
                                               f"{plan.status}{reason}{left}"))


started = widgets.page_timer()
st.title("Decisions")
c1, c2, c3 = st.columns(3)
decisions(limit=int(c1.selectbox("Plans shown", (20, 50, 100), index=0)),
          with_actions_only=c2.toggle("Only plans that change something", value=True,
                                      help="at least one action not held back by a guard"),
          dry_run_only=c3.toggle("Only dry-run plans", value=False))
widgets.footer(started)
