"""``headroom cost export``: showback per day, tenant, model and category as an OpenCost-style
CSV (see ``controlplane.cost_export``). Times default to the store's own clock (the last tick), so
a simulated demo store exports its simulated days."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from controlplane import cost_export, cost_reader
from controlplane.settings import load_settings
from controlplane.store import Store

app = typer.Typer(help="Cost model: showback and OpenCost-compatible CSV export.",
                  no_args_is_help=True)
console = Console(stderr=True)


@app.callback()
def cost() -> None:
    """Cost model: showback and OpenCost-compatible CSV export."""


def _parse_at(value: str, option: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not an ISO-8601 time", param_hint=option) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


@app.command("export")
def export(
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV file to write")],
    config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML settings file")]
    = None,
    until: Annotated[str | None, typer.Option(help="end (ISO-8601, UTC); default: last tick")]
    = None,
    days: Annotated[float, typer.Option(help="length of the window in days", min=0.001)] = 7.0,
    step_s: Annotated[float, typer.Option(help="sampling step of the plan in force", min=1.0)]
    = 60.0,
    warm_namespace: Annotated[str, typer.Option(help="namespace of warm-pool placeholders")]
    = "headroom",
) -> None:
    """Write the cost of every GPU, split by slice share to models and tenants, per UTC day."""
    settings = load_settings(config)
    engine = Store.open(settings.db.url, settings.db.connect_timeout_s).engine
    span = cost_reader.time_span(engine)
    if span is None:
        console.print(f"store {settings.db.url} has no reconcile ticks yet; nothing to export")
        raise typer.Exit(1)
    until_at = _parse_at(until, "--until") if until else span[1] + timedelta(seconds=1)
    since_at = max(span[0], until_at - timedelta(days=days))
    result = cost_export.showback(engine, cost_reader.price_table(engine), since_at, until_at,
                                  step_s)
    rows = cost_export.opencost_rows(result.accruals, result.requests, warm_namespace)
    written = cost_export.write_csv(rows, out)
    total = sum(a.usd for a in result.accruals)
    console.print(f"wrote {written} rows to {out}: {since_at:%Y-%m-%d %H:%M} .. "
                  f"{until_at:%Y-%m-%d %H:%M} UTC, {result.samples} samples, ${total:,.2f}")
