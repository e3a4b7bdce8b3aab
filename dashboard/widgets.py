"""Small presentation helpers shared by the pages."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Literal, TypedDict

import altair as alt
import pandas as pd
import streamlit as st

from controlplane.adapters.clock import WallClock
from controlplane.domain.cost import PriceTable
from controlplane.domain.pause import ModelPause
from controlplane.domain.tick_writers import UNKNOWN_WRITER
from controlplane.store.status_reader import SYNCED_LOOKBACK_TICKS
from dashboard import queries as q
from dashboard.markdown import escape_markdown


def usd(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"${value:,.{digits}f}"


def age_text(at: datetime) -> str:
    """How long ago ``at`` was on the wall clock; the demo's virtual clock may run ahead."""
    age_s = (WallClock().now() - at).total_seconds()
    if age_s < -1:
        return f"{span_text(-age_s)} ahead of wall time (simulated clock)"
    return f"{span_text(age_s)} ago"


def span_text(seconds: float) -> str:
    """A duration for people: 75 s, 15 min, 2.5 h, 3.0 d."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def require_tick(url: str, refreshes: bool = False) -> q.LastTick:
    """The newest tick, or stop the page with a hint when the store has none yet.
    ``refreshes``: the caller reruns on its own (a fragment with ``run_every``); other pages
    rerun only when the operator acts, so the hint says to reload."""
    tick = q.last_tick(url)
    if tick is None:
        then = ("this page refreshes on its own." if refreshes
                else "reload this page once it has one.")
        st.info(f"No reconcile tick in the store yet. Start `headroom demo` or `headroom serve`; "
                f"{then}")
        st.stop()
        raise RuntimeError("unreachable")  # st.stop() raises
    return tick


#: notes of the last tick shown in its warning; the rest are in the expander below it
NOTES_SHOWN = 3


def tick_notes(tick: q.LastTick) -> None:
    """The last tick's notes (what it could not read or do, and what it found wrong: a pool's
    NodePool edited, a workload asking for another GPU resource than its planned slice, a model
    whose load was not measured): a warning with the first few, all of them in an expander."""
    if not tick.notes:
        return
    count = len(tick.notes)
    lines = "\n".join(f"- {escape_markdown(n)}" for n in tick.notes[:NOTES_SHOWN])
    more = f"\n\n…and {count - NOTES_SHOWN} more below." if count > NOTES_SHOWN else ""
    st.warning(f"The last tick noted {count} thing(s) to look at (`headroom status` lists them "
               f"too):\n{lines}{more}")
    if count > NOTES_SHOWN:
        with st.expander(f"All {count} notes of the last tick"):
            st.markdown("\n".join(f"- {escape_markdown(n)}" for n in tick.notes))


def bound_text(value: float | None) -> str:
    """A replica bound as the table shows it: blank when unset (a float column when any model
    has none)."""
    return "" if value is None or pd.isna(value) else str(round(value))


def pause_of(models: pd.DataFrame, model: str) -> ModelPause | None:
    """The pause of ``model`` in the models table (``q.models``: ``headroom models pause``);
    None: not paused, or not listed."""
    row = models[models["name"] == model]
    if row.empty or pd.isna(row.iloc[0]["paused_at"]):
        return None
    r = row.iloc[0]
    paused_at: datetime = r["paused_at"].to_pydatetime()
    return ModelPause(model, None if pd.isna(r["paused_replicas"]) else int(r["paused_replicas"]),
                      paused_at, "" if pd.isna(r["paused_by"]) else str(r["paused_by"]))


def pauses_of(models: pd.DataFrame) -> dict[str, ModelPause]:
    """By model, the pause of each paused model in the models table (``pause_of`` of each,
    read in one pass rather than a scan of the table per model)."""
    paused = models[models["paused_at"].notna()]
    return {str(name): pause for name in paused["name"]
            if (pause := pause_of(paused, str(name))) is not None}


def held_text(pause: ModelPause) -> str:
    """What a pause holds, since when and by whom: ``held at 3 replica(s) since ... by ...``."""
    by = f" by {pause.paused_by}" if pause.paused_by else ""
    return f"held at {pause.held_text()} since {pause.paused_at:%Y-%m-%d %H:%M:%S} UTC{by}"


def paused_models(url: str) -> None:
    """A caption naming every paused model (``headroom models pause``), as ``headroom status``
    lists them: the replicas held, since when and by whom; nothing when none is paused."""
    paused = list(pauses_of(q.models(url)).items())
    if paused:
        st.caption(escape_markdown(
            "Paused models (headroom models pause, until headroom models resume NAME): "
            + "; ".join(f"{name} {held_text(pause)}" for name, pause in paused)))


def fleet_paused(url: str) -> None:
    """A warning while the fleet is paused (``headroom fleet pause``), as ``headroom status``
    says it: since when, by whom, why, and what it does."""
    pause = q.fleet_pause(url)
    if pause is not None:
        line = pause.line()
        st.warning(escape_markdown(line[0].upper() + line[1:] + "."))


def fleet_unread(tick: q.LastTick) -> None:
    """When the newest tick could not read the fleet (the API unreachable, ...): a warning
    naming it, why, and since when no tick has (``headroom status``'s "fleet seen"); the
    billed GPUs, load and capacity shown are then the fleet as the newest tick that read it
    saw it."""
    if tick.read_the_fleet:
        return
    why = escape_markdown(f"{tick.status}, {tick.reason}" if tick.reason else tick.status)
    newest = (f"The newest tick (#{tick.tick_id} at {tick.started_at:%Y-%m-%d %H:%M:%S} UTC) "
              f"could not read the fleet ({why}).")
    if tick.fleet_tick_id is None or tick.fleet_at is None:
        st.warning(f"{newest} Neither could any of the {SYNCED_LOOKBACK_TICKS} ticks before "
                   "it: billed GPUs, load and capacity are not known.")
        return
    unread_s = (tick.started_at - tick.fleet_at).total_seconds()
    st.warning(f"{newest} No tick has read it since tick #{tick.fleet_tick_id} at "
               f"{tick.fleet_at:%Y-%m-%d %H:%M:%S} UTC ({span_text(unread_s)} before the "
               "newest): billed GPUs, load and capacity are the fleet as that tick saw it.")


def store_clock(tick: q.LastTick) -> None:
    st.caption(f"Store clock: last tick {tick.started_at:%Y-%m-%d %H:%M:%S} UTC "
               f"({age_text(tick.started_at)}), {tick.ticks:,} ticks since "
               f"{tick.first_at:%Y-%m-%d %H:%M} UTC. Read-only; cached for a few seconds.")


def tick_writers(url: str, tick: q.LastTick) -> None:
    """Which replica wrote the newest tick (the one that leads: its Lease holder identity, or
    the store lease holder's of a simulated fleet) and, when another wrote before it within
    the lookback, when leadership changed (as ``headroom status`` shows them)."""
    writers = q.tick_writers(url, tick.tick_id)
    st.caption(escape_markdown(f"Newest tick written by {writers.writer or UNKNOWN_WRITER}"))
    change = writers.change
    if change is not None:
        st.caption(escape_markdown(
            f"Leadership changed at {change.changed_at:%Y-%m-%d %H:%M:%S} UTC (tick "
            f"#{change.first_tick_id}, {age_text(change.changed_at)}): "
            f"{change.previous_writer} → {change.writer}; {change.previous_writer}'s last tick "
            f"was at {change.previous_tick_at:%Y-%m-%d %H:%M:%S} UTC"))
    unrecorded = writers.unrecorded
    if unrecorded is not None:
        st.caption(escape_markdown(
            f"Unrecorded tick: started at {unrecorded.started_at:%Y-%m-%d %H:%M:%S} UTC "
            f"({age_text(unrecorded.started_at)}) by {unrecorded.writer or UNKNOWN_WRITER}, no "
            "record saved yet (in progress, or killed after it may have acted; the next tick "
            "starts from the guard memory it saved before acting)"))


def price_sources(table: PriceTable, products: list[str]) -> None:
    rows = [table.price_of(p) for p in sorted(products)]
    st.dataframe(
        [{"GPU product": p.product, "$ per GPU-hour": p.usd_per_gpu_hour, "source": p.source,
          "as of": p.as_of} for p in rows],
        hide_index=True, width="stretch")


def time_x() -> alt.X:
    """The time axis of every chart, in UTC whatever the browser's time zone."""
    return alt.X("at:T", title="UTC", scale=alt.Scale(type="utc"),
                 axis=alt.Axis(format="%m-%d %H:%M", labelOverlap=True))


def page_timer() -> float:
    return time.perf_counter()


def footer(started: float) -> None:
    """The last element of every page: how long the page took (also the sign, for browser
    tests and the benchmark, that the page finished rendering)."""
    st.caption(f"Rendered in {time.perf_counter() - started:.2f} s · read-only view of the store",
               help="Headroom dashboard")


class _NoteDelta(TypedDict):
    delta_color: Literal["off"]
    delta_arrow: Literal["off"]


INFO_DELTA: _NoteDelta = {"delta_color": "off", "delta_arrow": "off"}  # a note, not a trend
