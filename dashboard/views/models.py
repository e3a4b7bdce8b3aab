"""Models: forecast p50/p90 band vs actual demand, ready capacity, replicas, warm pool, the
serving signals over time (latency against the SLO, queued requests, KV cache usage), recent
forecast error and the throughput per replica the loop sizes with (offline profile vs corrected
from observed metrics, with the reason), the replica bounds, pause and newest replica change with
its reason, and what was done to its history before its newest forecast (the forecast's notes),
per model; and every model at a glance."""

from __future__ import annotations

from datetime import timedelta

import altair as alt
import pandas as pd
import streamlit as st

from controlplane.domain.budget_hold import holds_noted
from controlplane.domain.hints import NOT_LISTED, DemandHint
from controlplane.domain.stranded import stranded_noted
from controlplane.domain.wording import counted
from dashboard import history, widgets
from dashboard import model_queries as mq
from dashboard import queries as q
from dashboard import signals as sg
from dashboard.context import store_url
from dashboard.markdown import escape_markdown

WINDOWS = {"6 h": timedelta(hours=6), "24 h": timedelta(hours=24), "7 d": timedelta(days=7)}
LEADS_MIN = (1, 5, 10, 15, 20)
FRESH_MIN = 10  # an observation older than this before the newest tick is not "now"
#: how far back before the newest tick a model's newest replica change is looked for
CHANGES_WINDOW = timedelta(hours=24)

#: the All models table's columns that say what bounds or holds a model's replicas
CONTROL_HELP = {
    "min_replicas": st.column_config.TextColumn(
        "min replicas", help="the models file's min_replicas: hot replicas never fewer (a GPU "
                             "budget or pool max_nodes still wins); blank: unset"),
    "max_replicas": st.column_config.TextColumn(
        "max replicas", help="the models file's max_replicas: hot plus idle replicas never "
                             "more; blank: unset"),
    "paused": st.column_config.TextColumn(
        "paused", help="headroom models pause: the replicas held, since when and by whom; "
                       "blank: not paused"),
    "replica_reason": st.column_config.TextColumn(
        "replica reason", help="the GPU budget or pool max_nodes that holds the model below "
                               "the replicas it was sized for at the newest tick (held of "
                               "sized), else the reason of its newest replica change in the "
                               "24 h before the newest tick (it names a bound, a pause, a GPU "
                               "budget or pool cap); blank: neither"),
}
#: and those of the All models table's forecast columns
COLUMN_HELP = {**CONTROL_HELP, "forecast_notes": st.column_config.TextColumn(
    "forecast notes", help="what was done to the model's history before its newest forecast "
                           "(e.g. negative values clipped to 0); blank: nothing")}


def well_formed(forecasts: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The stored forecasts the charts can read (a positive step, as many p90 as p50 values) and
    how many others there were; those are counted on the page, not drawn wrong or raised."""
    if forecasts.empty:
        return forecasts, 0
    ok = [int(r.step_s) > 0 and len(r.p50) == len(r.p90)
          for r in forecasts.itertuples(index=False)]
    return forecasts[ok], len(ok) - sum(ok)


def forecast_at_lead(forecasts: pd.DataFrame, lead_min: int) -> pd.DataFrame:
    """Each stored forecast's p50/p90 for the point ``lead_min`` after its last observation."""
    rows = []
    for r in forecasts.itertuples(index=False):
        step_s = int(r.step_s)
        i = round(lead_min * 60 / step_s) - 1
        if 0 <= i < len(r.p50):
            rows.append((r.origin_at + timedelta(seconds=i * step_s), r.p50[i], r.p90[i]))
    return pd.DataFrame(rows, columns=["at", "p50", "p90"])


def latest_path(forecasts: pd.DataFrame) -> pd.DataFrame:
    if forecasts.empty:
        return pd.DataFrame(columns=["at", "p50", "p90"])
    last = forecasts.iloc[-1]
    return pd.DataFrame({"at": [last.origin_at + timedelta(seconds=i * int(last.step_s))
                                for i in range(len(last.p50))],
                         "p50": last.p50, "p90": last.p90})


def forecast_error(band: pd.DataFrame, actual: pd.DataFrame) -> dict[str, float] | None:
    """WAPE of p50, p90 coverage and bias against the minute-mean actual demand."""
    if band.empty or actual.empty:
        return None
    minute = actual.set_index("at")["demand_rps"].resample("1min").mean().dropna()
    joined = band.assign(at=band["at"].dt.floor("1min")).join(minute.rename("actual"), on="at")
    joined = joined.dropna(subset=["actual"])
    total = float(joined["actual"].sum())
    if joined.empty or total <= 0:
        return None
    return {"pairs": float(len(joined)),
            "wape_pct": 100 * float((joined["actual"] - joined["p50"]).abs().sum()) / total,
            "coverage_pct": 100 * float((joined["actual"] <= joined["p90"]).mean()),
            "bias_pct": 100 * float((joined["p50"] - joined["actual"]).sum()) / total}


def demand_chart(actual: pd.DataFrame, band: pd.DataFrame, path: pd.DataFrame) -> alt.LayerChart:
    x = widgets.time_x()
    area = alt.Chart(band).mark_area(opacity=0.25, color="#4c78a8").encode(
        x=x, y=alt.Y("p50:Q", title="requests / s"), y2="p90:Q")
    p50 = alt.Chart(band).mark_line(color="#4c78a8", strokeDash=[4, 2]).encode(x=x, y="p50:Q")
    future = alt.Chart(path).mark_area(opacity=0.45, color="#f58518").encode(x=x, y="p50:Q",
                                                                              y2="p90:Q")
    lines = actual.melt(id_vars="at", value_vars=["demand_rps", "capacity_rps"],
                        var_name="series", value_name="rps")
    observed = alt.Chart(lines).mark_line().encode(
        x=x, y="rps:Q", color=alt.Color("series:N", title=None,
                                        scale=alt.Scale(domain=["demand_rps", "capacity_rps"],
                                                        range=["#222222", "#54a24b"])))
    chart: alt.LayerChart = (area + p50 + future + observed).properties(height=300)
    return chart


def overview_table(url: str, tick: q.LastTick) -> pd.DataFrame:
    """Every listed model, and any other observed recently (removed from the models table in
    the last 10 minutes), as ``headroom status`` lists them; with its replica
    bounds, its pause and the budget holding it short, else the reason of its newest replica
    change."""
    models = q.models(url)
    latest = q.latest_observations(url, tick.observed_through)
    unlisted = sorted(set(latest["model"]) - set(models["name"]))
    # the models table's text columns blank for them, not NaN ("None" or "NaN" in the table)
    models = pd.concat([models, pd.DataFrame({"name": unlisted, "tenant": "", "isolation": ""})],
                       ignore_index=True) if unlisted else models
    meta = mq.latest_forecast_meta(url)
    profiles = q.latest_profiles(url)
    changes = q.replica_changes(url, tick.started_at - CHANGES_WINDOW)
    frame = models.merge(latest, left_on="name", right_on="model", how="left").merge(
        meta, left_on="name", right_on="model", how="left", suffixes=("", "_f")).merge(
        profiles, left_on="name", right_on="model", how="left", suffixes=("", "_p")).merge(
        changes[["model", "replica_reason"]], left_on="name", right_on="model", how="left",
        suffixes=("", "_r"))
    for bound in ("min_replicas", "max_replicas"):
        frame[bound] = [widgets.bound_text(v) for v in frame[bound]]
    pauses = widgets.pauses_of(models)
    frame["paused"] = [widgets.held_text(pauses[name]) if name in pauses else ""
                       for name in frame["name"]]
    # a budget holding the model short at the newest tick says so whether or not it changed
    # its replicas (a fleet started at the budget never does)
    holds = holds_noted(tick.notes)
    frame["replica_reason"] = [holds[name].reason() if name in holds else reason
                               for name, reason in zip(frame["name"],
                                                       frame["replica_reason"].fillna(""),
                                                       strict=True)]
    frame["forecast_notes"] = [notes_text(n) for n in frame["notes"]]
    return frame[["name", "tenant", "isolation", "min_replicas", "max_replicas", "paused",
                  "demand_rps", "capacity_rps", "replicas_ready", "replica_reason",
                  "offline_rps", "corrected_rps", "factor", "profile_reason",
                  "method", "fallback_reason", "forecast_notes", "backtest_wape"]].round(2).rename(
        columns={"backtest_wape": "backtest WAPE %"})


def replica_lines(url: str, tick: q.LastTick, model: str) -> tuple[str | None, list[str]]:
    """What holds or bounds ``model``'s replicas, for the page: a warning when it is paused,
    and captions of its bounds, the budget holding it short at the newest tick, its pods no
    node had bound then (with why, when they are stranded replicas of several GPUs) and its
    newest replica change with the reason."""
    models = q.models(url)
    pause = widgets.pause_of(models, model)
    warning = None if pause is None else (
        f"{model} is paused (headroom models pause): {widgets.held_text(pause)}; the loop plans no "
        f"change for it until headroom models resume {model}")
    captions = []
    row = models[models["name"] == model]
    if not row.empty:
        low, high = (widgets.bound_text(row.iloc[0][b])
                     for b in ("min_replicas", "max_replicas"))
        if low or high:
            captions.append(f"Replica bounds (models file): min {low or 'unset'}, max "
                            f"{high or 'unset'}; a GPU budget or pool max_nodes still wins "
                            "over the min")
    hold = holds_noted(tick.notes).get(model)
    if hold is not None:
        captions.append(f"Held short at the newest tick: {hold.note()}")
    unscheduled = tick.unscheduled.get(model, 0)
    if unscheduled:
        stranded = stranded_noted(tick.notes).get(model)
        captions.append(f"Unscheduled at the newest tick: {counted(unscheduled, 'pod')} no node "
                        "has bound (Pending)" + (f"; {stranded}" if stranded else ""))
    changes = q.replica_changes(url, tick.started_at - CHANGES_WINDOW)
    change = changes[changes["model"] == model]
    if not change.empty:
        c = change.iloc[0]
        done = ("dry run, not applied" if c["dry_run"] else "no outcome recorded"
                if pd.isna(c["ok"]) else "applied" if c["ok"] else "failed")
        captions.append(f"Newest replica change: {int(c['replicas_from'])} → "
                        f"{int(c['replicas_to'])} replicas at "
                        f"{c['changed_at']:%Y-%m-%d %H:%M:%S} UTC ({done}), reason "
                        f"{c['replica_reason']}")
    return warning, captions


def notes_text(notes: object) -> str:
    """A forecast's notes in one cell, '' when it has none (or the model has no forecast)."""
    return "; ".join(notes) if isinstance(notes, tuple) else ""


def notes_line(table: pd.DataFrame, model: str) -> str | None:
    """What was done to ``model``'s history before its newest forecast, for the page; None
    when nothing was."""
    row = table[table["name"] == model]
    if row.empty or not row.iloc[0]["forecast_notes"]:
        return None
    return f"Newest forecast made from cleaned input: {row.iloc[0]['forecast_notes']}"


def profile_line(table: pd.DataFrame, model: str) -> str | None:
    """The throughput per replica the loop sizes ``model`` with, offline vs corrected."""
    row = table[table["name"] == model]
    if row.empty or pd.isna(row.iloc[0]["offline_rps"]):
        return None
    r = row.iloc[0]
    return (f"Throughput per replica at the SLO: {r.offline_rps:,.2f} rps offline, "
            f"{r.corrected_rps:,.2f} rps corrected ({r.factor:.2f}x): "
            f"{escape_markdown(str(r.profile_reason))}")


def hint_caption(h: DemandHint, listed: bool, paused: bool = False) -> str:
    """A demand hint in force or ahead, as the Models page's caption (markdown, its reason
    escaped); ``listed``: whether the models table lists its model. One it does not (``headroom
    models remove --keep-hints``) is marked " (model not listed)", as ``headroom hint list``
    marks it: it floors nothing until ``headroom models import`` lists the model again. On a
    ``paused`` model the pause overrides it, as ``headroom status`` says."""
    why = f" ({escape_markdown(h.reason)})" if h.reason else ""
    effect = ("it floors nothing until headroom models import lists the model again (headroom "
              f"hint remove {h.hint_id} withdraws it)" if not listed else
              f"the pause overrides it until headroom models resume {escape_markdown(h.model)}"
              if paused else "the loop sizes from the forecast floored by it")
    return (f"Demand hint {h.hint_id}{'' if listed else NOT_LISTED}: at least {h.rate_rps:,g} "
            f"rps from {h.start_at:%Y-%m-%d %H:%M} until {h.end_at:%Y-%m-%d %H:%M} UTC{why}; "
            f"{effect}")


def signals_section(url: str, model: str, actual: pd.DataFrame) -> None:
    """The model's latency, queue and KV cache over the window, those it measured side by
    side, each against its limit."""
    measured = sg.measured(actual)
    if not measured:
        st.caption(f"No latency, queue or KV cache reading of {escape_markdown(model)} is "
                   "stored in this window (not measured, or a store older than them).")
        return
    listed = q.models(url)
    slo = listed.loc[listed["name"] == model, "latency_slo_ms"]
    slo_ms = float(slo.iloc[0]) if not slo.empty else None
    st.subheader("Serving signals")
    for column, signal in zip(st.columns(len(measured)), measured, strict=True):
        frame = sg.signal_frame(actual, signal, slo_ms)
        column.markdown(f"**{signal.title}**")
        column.altair_chart(sg.signal_chart(frame, signal), width="stretch")
        column.caption(sg.over_limit(frame, signal))


def main() -> None:
    url = store_url()
    tick = widgets.require_tick(url)
    widgets.store_clock(tick)
    table = overview_table(url, tick)
    names = list(table.sort_values("demand_rps", ascending=False)["name"])
    if not names:
        st.info("No models in the store yet.")
        return
    c1, c2, c3 = st.columns([3, 1, 1])
    # keyed: the busiest-first order changes as the store moves on, which would otherwise
    # make a new widget and jump back to the busiest model
    model = c1.selectbox("Model", names, index=0, key="model")
    window = WINDOWS[c2.radio("Window", list(WINDOWS), index=1, horizontal=True)]
    lead_min = c3.selectbox("Forecast lead (min)", LEADS_MIN, index=len(LEADS_MIN) - 1)
    until_at = tick.started_at
    since_at = max(tick.first_at, until_at - window)
    actual = mq.model_history(url, model, since_at, tick.observed_through)
    forecasts, malformed = well_formed(
        mq.forecast_history(url, model, since_at - timedelta(hours=1), until_at))
    if malformed:
        st.warning(f"{malformed} stored forecast(s) of {escape_markdown(model)} left "
                   "out: a step of 0 s or p90 values not matching the p50 values.")
    band = forecast_at_lead(forecasts, lead_min)
    band = band[band["at"] >= since_at]
    error = forecast_error(band, actual)

    cols = st.columns(5)
    now = actual.iloc[-1] if not actual.empty else None
    # the newest observation of the window may be old (a model the loop stopped observing)
    seen_at = now["at"] if now is not None else until_at  # a row's .at is pandas' indexer
    age_min = (until_at - seen_at).total_seconds() / 60
    seen = (f"last seen {seen_at:%H:%M} UTC, {age_min:,.0f} min before the newest tick"
            if now is not None and age_min > FRESH_MIN else None)
    cols[0].metric("Demand now" if seen is None else "Demand (last seen)",
                   f"{now.demand_rps:,.1f} rps" if now is not None else "n/a", seen,
                   **widgets.INFO_DELTA)
    cols[1].metric("Ready capacity", f"{now.capacity_rps:,.1f} rps" if now is not None else "n/a")
    cols[2].metric("Ready replicas", int(now.replicas_ready) if now is not None else "n/a")
    cols[3].metric(f"WAPE p50 @ {lead_min} min", f"{error['wape_pct']:.1f}%" if error else "n/a",
                   f"bias {error['bias_pct']:+.1f}%" if error else None, **widgets.INFO_DELTA)
    cols[4].metric("p90 coverage", f"{error['coverage_pct']:.0f}%" if error else "n/a",
                   f"{error['pairs']:.0f} pairs" if error else None, **widgets.INFO_DELTA)

    held, captions = replica_lines(url, tick, model)
    if held is not None:
        st.warning(escape_markdown(held))
    for caption in captions:
        st.caption(escape_markdown(caption))
    line = profile_line(table, model)
    if line is not None:
        st.caption(line)
    noted = notes_line(table, model)
    if noted is not None:
        st.caption(escape_markdown(noted))
    listed = model in set(q.models(url)["name"])
    for h in q.hints_in_force(url, until_at):
        if h.model == model:
            st.caption(hint_caption(h, listed, paused=held is not None))
    st.subheader(f"{escape_markdown(model)}: demand, capacity and the {lead_min}-minute-"
                 "ahead forecast band")
    st.altair_chart(demand_chart(actual, band, latest_path(forecasts)), width="stretch")
    st.caption("Blue band: p50–p90 of the forecasts made for each point; orange: the newest "
               "forecast's path; black: observed demand; green: ready capacity.")
    left, right = st.columns(2)
    with left:
        st.subheader("Ready replicas")
        st.altair_chart(alt.Chart(actual).mark_line(interpolate="step-after").encode(
            x=widgets.time_x(), y=alt.Y("replicas_ready:Q", title="replicas"))
            .properties(height=180), width="stretch")
    with right:
        st.subheader("Warm pool (fleet, GPUs held by the plan)")
        fleet = history.fleet_timeline(url, since_at, until_at)
        st.altair_chart(alt.Chart(fleet).mark_line(interpolate="step-after").encode(
            x=widgets.time_x(),
            y=alt.Y("warm_gpus:Q", title="warm GPUs", axis=alt.Axis(format="d")))
            .properties(height=180), width="stretch")
    signals_section(url, model, actual)
    st.subheader("All models")
    st.dataframe(table, hide_index=True, width="stretch", height=320,
                 column_config=COLUMN_HELP)


started = widgets.page_timer()
st.title("Models")
main()
widgets.footer(started)
