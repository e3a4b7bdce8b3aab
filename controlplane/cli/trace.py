"""``headroom trace export``: the demand the loop observed, as a ``headroom simulate --trace``
(see ``controlplane.trace_export``). With ``headroom models list --yaml`` it replays the loop's
own history under another policy or setting: ``headroom simulate --trace T --models M``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from controlplane.cli.numbers import float_option
from controlplane.cli.paths import check_output_path, write_atomically
from controlplane.cli.store_origin import ConfigOption, DbOption, with_existing_store
from controlplane.cli.streams import print_warning, usage_error
from controlplane.cli.times import parse_utc
from forecaster.errors import InputError

if TYPE_CHECKING:  # imported where used: `headroom trace --help` loads no store
    from datetime import datetime

    from controlplane.store import Store
    from forecaster.types import TrafficSeries

app = typer.Typer(help="Demand traces: the load the loop observed, for headroom simulate.",
                  no_args_is_help=True)
console = Console(stderr=True)


@app.callback()
def trace() -> None:
    """Demand traces: the load the loop observed, for headroom simulate."""


def _check_step(step_s: int) -> None:
    """A step ``simulate`` replays: one that divides a minute, or whole minutes."""
    if not (60 % step_s == 0 or step_s % 60 == 0):
        raise InputError(f"--step-s {step_s}: simulate replays a step that divides a minute "
                         "(1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30) or is whole minutes")


@app.command("export")
def export(
    out: Annotated[Path, typer.Option("--out", "-o", help="trace CSV to write (ts,model,"
                                                          "rate_rps: simulate's default "
                                                          "columns)")],
    models: Annotated[str | None, typer.Option(
        help="comma-separated models of the store's models table [default: every one]")] = None,
    until: Annotated[str | None, typer.Option(
        help="end (ISO-8601, UTC); default and latest: the step of the newest observation")]
    = None,
    days: Annotated[float, float_option(help="length of the window in days", min=0.001,
                                        max=3650.0)] = 7.0,
    step_s: Annotated[int, typer.Option(help="seconds per row: the mean of the observations "
                                             "in each step", min=1, max=3600)] = 60,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Write each model's observed demand (requests/s, the mean per step) as a trace CSV."""
    from controlplane import trace_export
    from controlplane.cli.demo_store import settings_with_db
    from controlplane.cli.forecast_source import wanted_models
    from controlplane.settings import ConfigError
    from controlplane.store.engine import redact, sqlite_file

    try:
        _check_step(step_s)
        until_at = None if until is None else parse_utc(until, "--until")
        url = settings_with_db(config, db).db.url
        store_file = sqlite_file(url)
        check_output_path(out, "--out", {**({"the store (db.url)": store_file} if store_file
                                            else {}), **({"--config": config} if config else {})})
    except (InputError, ConfigError) as error:
        raise usage_error(str(error)) from None

    def read(store: Store) -> tuple[datetime, datetime, tuple[TrafficSeries, ...]] | None:
        known = store.model_names()
        wanted = wanted_models(models)
        if wanted == []:
            raise InputError(f"--models {models!r}: no model name; give comma-separated names "
                             "or leave it out for every model")
        unknown = [m for m in wanted or () if m not in known]
        if unknown:
            raise InputError(f"--models: model {unknown[0]!r} is not in the store's models "
                             f"table (models: {known})")
        span = trace_export.observation_span(store)
        if span is None or not known:
            return None
        since_at, end_at = trace_export.export_window(*span, step_s, days, until_at)
        return (since_at, end_at,
                trace_export.read_series(store, wanted or known, since_at, end_at, step_s))

    got = with_existing_store(config, db, read)
    if got is None:
        console.print(f"store {redact(url)} has no models or no observed load yet; nothing to "
                      "export", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    since_at, end_at, series = got
    text, rows = trace_export.trace_csv(series)
    for line in trace_export.gap_warnings(series):
        print_warning(line)
    try:
        write_atomically(out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except OSError as error:
        raise usage_error(f"--out {out}: cannot write: {error.strerror or error}") from None
    written = sum(1 for s in series if s.observed_count())
    console.print(f"wrote {rows} rows of {written} model(s) to {out}: {since_at:%Y-%m-%d %H:%M} "
                  f".. {end_at:%Y-%m-%d %H:%M} UTC, a row per model and {step_s} s step",
                  markup=False, highlight=False, soft_wrap=True)
