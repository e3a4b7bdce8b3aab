"""``headroom cost export``: showback per day, tenant, model and category as an OpenCost-style
CSV (see ``controlplane.cost_export``). Times default to the store's own clock (the last tick), so
a simulated demo store exports its simulated days. The window never reaches past the store's
ticks: before the first and after the last one nothing was recorded."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from controlplane.cli.demo_store import settings_with_db, with_demo_hint
from controlplane.cli.numbers import float_option
from controlplane.cli.paths import check_output_path, store_files, write_atomically
from controlplane.cli.store_origin import DbOption, db_url_named, store_error_line
from controlplane.cli.streams import usage_error
from controlplane.cli.times import parse_utc
from controlplane.domain import cost_gaps
from controlplane.domain.cost import window_bounds
from forecaster.errors import InputError

app = typer.Typer(help="Cost model: showback and OpenCost-compatible CSV export.",
                  no_args_is_help=True)
console = Console(stderr=True)


@app.callback()
def cost() -> None:
    """Cost model: showback and OpenCost-compatible CSV export."""


_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # DNS-1123 label


def _check_namespace(value: str, option: str) -> None:
    if not _NAMESPACE.match(value):
        raise InputError(f"{option} {value!r}: not a Kubernetes namespace name (lowercase "
                         "letters, digits and '-', at most 63)")


def _window(span: tuple[datetime, datetime], until: str | None,
            days: float) -> tuple[datetime, datetime]:
    """[since, until) of the export: ``days`` long, ending at ``until`` (default and latest: the
    last tick), inside the store's ticks; the dashboard's Cost page window (``window_bounds``)."""
    first_at, last_at = span
    until_at = None if until is None else parse_utc(until, "--until")
    if until_at is not None and until_at <= first_at:
        raise InputError(f"--until {until}: at or before the store's first tick "
                         f"({first_at:%Y-%m-%d %H:%M:%S} UTC); nothing to export")
    return window_bounds(first_at, last_at, timedelta(days=days), until_at)


@app.command("export")
def export(
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV file to write")],
    config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML settings file")]
    = None,
    until: Annotated[str | None, typer.Option(
        help="end (ISO-8601, UTC); default and latest: the last tick")] = None,
    days: Annotated[float, float_option(help="length of the window in days", min=0.001,
                                        max=3650.0)] = 7.0,
    step_s: Annotated[float | None, float_option(
        help="sample the plan in force every STEP_S seconds instead (approximate: a plan between "
             "two samples is missed); default: every recorded plan, each held until the next "
             "tick, as the dashboard's Cost page", min=1.0, max=86400.0)] = None,
    warm_namespace: Annotated[str, typer.Option(help="namespace of warm-pool placeholders")]
    = "headroom",
    db: DbOption = None,
) -> None:
    """Write the cost of every GPU, split by slice share to models and tenants, per UTC day."""
    from sqlalchemy.exc import SQLAlchemyError

    from controlplane import cost_export, cost_reader
    from controlplane.domain.price_history import unapplied_price_notes
    from controlplane.settings import ConfigError, pool_specs
    from controlplane.store import StoreUnavailable
    from controlplane.store.configured import open_existing_store
    from controlplane.store.engine import redact

    try:
        _check_namespace(warm_namespace, "--warm-namespace")
        settings = settings_with_db(config, db)
        url = settings.db.url
        inputs = store_files(url)
        if config is not None:
            inputs["--config"] = config
        check_output_path(out, "--out", inputs)
        try:
            with db_url_named(settings):
                engine = open_existing_store(settings.db).engine
        except StoreUnavailable as error:
            raise with_demo_hint(error, settings) from None
        span = cost_reader.time_span(engine)
        if span is None:
            console.print(f"store {redact(url)} has no reconcile ticks yet; nothing to export",
                          markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(1)
        since_at, until_at = _window(span, until, days)
        if since_at == until_at:  # one tick: cost accrues from one tick to the next
            console.print(f"store {redact(url)} has one reconcile tick so far; cost accrues "
                          "from one tick to the next: nothing to export yet",
                          markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(1)
        history = cost_reader.price_history(engine)
        result = cost_export.showback(engine, history, since_at, until_at, step_s,
                                      cost_gaps.gap_limit_s(settings.reconcile.interval_s))
        notes = (unapplied_price_notes(pool_specs(settings), history.at(until_at))
                 if config is not None and "pools" in settings.model_fields_set else ())
    except (ConfigError, StoreUnavailable, InputError) as error:
        raise usage_error(str(error)) from None
    except SQLAlchemyError as error:
        raise usage_error(store_error_line(url, error)) from None
    rows = cost_export.opencost_rows(result.accruals, result.requests, warm_namespace,
                                     cost_gaps.hours_per_day(result.unrecorded))
    try:
        write_atomically(out, lambda tmp: tmp.write_text(cost_export.csv_text(rows),
                                                         encoding="utf-8"))
    except OSError as error:
        raise usage_error(f"--out {out}: cannot write: {error.strerror or error}") from None
    total = sum(a.usd for a in result.accruals)
    console.print(f"wrote {len(rows)} rows to {out}: {since_at:%Y-%m-%d %H:%M} .. "
                  f"{until_at:%Y-%m-%d %H:%M} UTC, {result.samples} "
                  f"{'plans held' if step_s is None else 'samples'}, ${total:,.2f}",
                  markup=False, highlight=False, soft_wrap=True)  # the path whole, as given
    for note in notes:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    if result.unrecorded:
        console.print(f"note: no plan recorded {cost_gaps.spans_text(result.unrecorded)}; the "
                      "cost there holds the plan in force before (column UnrecordedHours)")
