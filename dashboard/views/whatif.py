"""What-if: open ``headroom simulate`` results and compare policies' dollars against short
minutes (one timeline CSV per policy, or one CSV with a ``policy`` column)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import altair as alt
import pandas as pd
import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

from controlplane.domain.cost import GpuPrice
from controlplane.domain.errors import error_line
from controlplane.settings import ConfigError, load_inherited_settings
from controlplane.store.engine import StoreUnavailable, redact, sqlite_file
from dashboard import history, whatif, widgets
from dashboard import model_queries as mq
from dashboard.markdown import escape_markdown


def _error(text: str) -> None:
    """An error naming files and policies as written (names are not markdown)."""
    st.error(escape_markdown(text))


class Upload(Protocol):
    name: str

    def getvalue(self) -> bytes: ...


def collect_sources(uploads: list[Upload], paths_text: str) -> list[tuple[str, bytes]]:
    """(name, bytes) of every uploaded file and every path (a folder means its *.csv/*.json),
    each file once; a folder without timelines or a file that cannot be read is an error line."""
    sources = [(f.name, f.getvalue()) for f in uploads]
    seen: set[Path] = set()
    for raw in paths_text.splitlines():  # one per line: a comma may be part of a name
        path = Path(raw.strip()).expanduser()
        if not raw.strip():
            continue
        if path.is_dir():
            files = sorted(p for p in [*path.glob("*.csv"), *path.glob("*.json")] if p.is_file())
            if not files:
                _error(f"{path}: no .csv or .json file in this folder")
        elif path.exists():
            files = [path]
        else:
            _error(f"{path}: no such file or folder")
            continue
        for file in files:
            if file.resolve() in seen:
                continue
            seen.add(file.resolve())
            try:
                sources.append((str(file), file.read_bytes()))
            except OSError as error:
                _error(f"{file}: cannot read it ({error.strerror or error})")
    return sources


def store_prices() -> tuple[tuple[GpuPrice, ...], str, str]:
    """The store's configured prices, or none and why, and the store's URL ("" when the
    settings cannot be read): the page works without a store (it reads timelines), and never
    creates a SQLite file or shows a traceback."""
    try:
        url = load_inherited_settings().db.url
    except ConfigError as error:
        return (), f"the settings cannot be read ({error})", ""
    missing = sqlite_file(url)
    if missing is not None and not missing.exists():
        return (), f"there is no store file at {missing}", url
    try:
        return history.configured_prices(url), "", url
    except StoreUnavailable as error:
        return (), f"the store cannot be opened ({error})", url
    except SQLAlchemyError as error:
        return (), f"the store at {redact(url)} cannot be read ({error_line(error)})", url


def price_input(configured: tuple[GpuPrice, ...], no_store: str) -> float:
    """One price for every GPU-hour of a timeline that does not name products."""
    products = whatif.price_products(configured)
    left, right = st.columns(2)
    choice = left.selectbox("Price the billed GPUs as", [*products, "custom"],
                            index=products.index("A100-80GB"))
    if choice == "custom":
        return float(right.number_input("$ per GPU-hour", min_value=0.0, value=1.0, step=0.1))
    chosen = whatif.price_for(choice, configured, no_store)
    right.metric("$ per GPU-hour", f"${chosen.price.usd_per_gpu_hour:,.3f}",
                 "store price" if chosen.configured else "list price", **widgets.INFO_DELTA)
    st.caption(chosen.why)
    return chosen.price.usd_per_gpu_hour


def product_prices(products: list[str], configured: tuple[GpuPrice, ...],
                   no_store: str) -> dict[str, float]:
    """A price per product named by the timelines: the store's configured price, else the list
    price, which the user may override."""
    st.markdown("**$ per GPU-hour of each GPU product** (timelines with a gpu_product column "
                "price each product's GPU-hours at its own price, as `headroom simulate` prices "
                "cost_usd)")
    columns = st.columns(min(len(products), 4))
    prices: dict[str, float] = {}
    whys: list[str] = []
    for i, product in enumerate(products):
        chosen = whatif.price_for(product, configured, no_store)
        prices[product] = float(columns[i % len(columns)].number_input(
            f"{escape_markdown(product)} $ per GPU-hour", min_value=0.0,
            value=chosen.price.usd_per_gpu_hour, step=0.1, format="%.3f",
            key=f"usd-per-gpu-hour-{product}"))
        whys.append(chosen.why)
    st.caption(" ".join(escape_markdown(why) for why in whys) + " Edit a price to override it.")
    return prices


def recorded_source(read: list[tuple[str, dict[str, pd.DataFrame]]], url: str, no_store: str
                    ) -> tuple[str, dict[str, pd.DataFrame]] | None:
    """What the loop did over the timelines' minutes (the store at ``url``'s records, policy
    ``recorded``), when asked for and there is a store (``no_store`` empty)."""
    span = whatif.timed_span([frame for _, timelines in read for frame in timelines.values()])
    if span is None or no_store:
        return None
    if not st.checkbox("Add what the loop did over these minutes: policy recorded, from this "
                       "store's records, as `headroom trace timeline` writes them"):
        return None
    try:
        text = mq.recorded_timeline(url, *span)
    except (StoreUnavailable, SQLAlchemyError) as error:
        _error(f"the store at {redact(url)} cannot be read ({error_line(error)})")
        return None
    if not text:
        st.info("The store recorded no reconcile tick over these minutes.")
        return None
    return "this store's records", whatif.read_timelines(text.encode(), "recorded.csv")


def comparison(outcomes: list[whatif.PolicyOutcome],
               reported: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame([{
        "policy": o.label, "$": round(o.usd, 2), "priced": o.priced,
        "summary cost_usd": reported.get(o.label), "GPU-hours": round(o.gpu_hours, 2),
        "short minutes": o.short_minutes, "short model-minutes": o.short_model_minutes,
        "short model-minutes %": round(o.short_model_minutes_pct, 2),
        "shortfall % of demand": round(100 * o.shortfall_requests / o.demand_requests, 3)
        if o.demand_requests else 0.0,
        "minutes": o.minutes, "gpus_billed read as": o.billing} for o in outcomes])


def main() -> None:
    st.caption("A model-minute is short when ready replicas x per-replica throughput < demand; "
               "a minute is short when any model is. GPU-hours = GPUs billed per minute / 60 "
               "(as ../shared/bench/sim_score.py counts them).")
    uploads = st.file_uploader("Timeline CSVs (and optional --json summaries)",
                               type=["csv", "json"], accept_multiple_files=True) or []
    paths_text = st.text_area("…or paths to files or folders (one per line)", height=70)
    sources = collect_sources(list(uploads), paths_text)
    read: list[tuple[str, dict[str, pd.DataFrame]]] = []  # (file, its timelines by label)
    reported: dict[str, object] = {}
    for name, data in sources:
        if name.endswith(".json"):
            try:
                reported[name] = json.loads(data)
            except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
                _error(f"{name}: not JSON ({error})")
            continue
        try:
            read.append((name, whatif.read_timelines(data, name)))
        except whatif.TimelineError as error:
            _error(str(error))
    configured, no_store, url = store_prices()
    recorded = recorded_source(read, url, no_store)
    if recorded is not None:
        read.append(recorded)
    frames = [frame for _, timelines in read for frame in timelines.values()]
    products = whatif.products_of(frames)
    by_product = product_prices(products, configured, no_store) if products else {}
    usd_per_gpu_hour = 0.0  # unused when every timeline names its products
    if not all(whatif.names_products(frame) for frame in frames) or not products:
        usd_per_gpu_hour = price_input(configured, no_store)
    one_price_note = st.empty()  # which timelines are priced at one price, once they are read
    if not sources:
        st.info("Open one timeline per policy, e.g. `headroom simulate --policy predictive "
                "--timeline-out predictive.csv ...` and the same for reactive and static.")
        return
    outcomes: list[whatif.PolicyOutcome] = []
    series: list[pd.DataFrame] = []
    labelled_by: dict[str, str] = {}  # policy label -> the file it came from
    for name, timelines in read:
        try:  # all of a file's policies or none of them
            summaries = [(whatif.summarize(label, frame, usd_per_gpu_hour, by_product),
                          whatif.minute_series(label, frame))
                         for label, frame in timelines.items()]
        except whatif.TimelineError as error:
            _error(f"{name}: {error}")
            continue
        clash = next((o.label for o, _ in summaries if o.label in labelled_by), None)
        if clash is not None:  # two rows (and one merged line) under one name would mislead
            _error(f"{name}: policy {clash} is already shown from {labelled_by[clash]}; "
                     "rename one of the files (or its policy values)")
            continue
        labelled_by.update((outcome.label, name) for outcome, _ in summaries)
        outcomes.extend(outcome for outcome, _ in summaries)
        series.extend(minutes for _, minutes in summaries)
    one_price = [o.label for o in outcomes if not o.gpu_hours_by_product]
    if one_price and products:
        one_price_note.caption(escape_markdown(
            f"Priced at the one price above: {', '.join(one_price)} (no gpu_product column, "
            "as in a timeline written before headroom simulate wrote one)."))
    elif one_price:
        one_price_note.caption(
            "These timelines have no gpu_product column (written before `headroom simulate` "
            "wrote one), so all their GPU-hours are priced at this one price; the run's "
            "cost_usd prices each product at its own.")
    costs: dict[str, float] = {}
    for document in reported.values():
        costs |= whatif.reported_cost_usd(document, labelled_by)
    for outcome in outcomes:
        cost = costs.get(outcome.label)
        if cost is not None and abs(round(outcome.usd, 2) - cost) > 0.005:
            why = ("the page prices a product differently from the run (the models file's "
                   "fleet.prices, or a price edited here)" if outcome.gpu_hours_by_product else
                   "this timeline has no gpu_product column, so the page prices all its "
                   "GPU-hours at one price")
            st.warning(escape_markdown(f"Policy {outcome.label}: the page's ${outcome.usd:,.2f} "
                                       f"differs from the run's summary cost_usd ${cost:,.2f}: "
                                       f"{why}."))
    if outcomes:
        table = comparison(outcomes, costs)
        st.subheader("Dollars against short minutes")
        st.altair_chart(alt.Chart(table).mark_circle(size=160).encode(
            x=alt.X("short minutes:Q", axis=alt.Axis(format="d", tickMinStep=1)),
            y=alt.Y("$:Q", axis=alt.Axis(format="$,.2f")), color="policy:N",
            tooltip=list(table.columns)).properties(height=280), width="stretch")
        st.dataframe(table, hide_index=True, width="stretch")
        minutes = pd.concat(series, ignore_index=True)
        timed = whatif.MINUTE_AT in minutes.columns and minutes[whatif.MINUTE_AT].notna().all()
        st.subheader("GPUs billed per minute")
        st.altair_chart(alt.Chart(minutes).mark_line(interpolate="step-after").encode(
            x=alt.X(f"{whatif.MINUTE_AT}:T", title="minute (UTC)") if timed
            else alt.X("minute:Q"), y=alt.Y("gpus_billed:Q", title="GPUs billed"),
            color="policy:N")
            .properties(height=220), width="stretch")
    for name, document in reported.items():
        with st.expander(f"Reported summary: {escape_markdown(name)} (as the product "
                         "printed it)"):
            st.json(document)


started = widgets.page_timer()
st.title("What-if")
main()
widgets.footer(started)
