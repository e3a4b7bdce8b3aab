"""``headroom trace export``: the demand the loop observed, as a ``headroom simulate --trace``
(``controlplane.trace_export``); with ``headroom models list --yaml`` it replays the loop's own
history under another policy or setting: ``headroom simulate --trace T --models M``. ``headroom
trace timeline``: what the loop did over it, as simulate's timeline
(``controlplane.recorded_timeline``), scored beside the simulated policies."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from controlplane.cli.numbers import float_option
from controlplane.cli.paths import check_output_path, store_files, write_atomically
from controlplane.cli.store_origin import ConfigOption, DbOption, with_existing_store
from controlplane.cli.streams import print_warning, usage_error
from controlplane.cli.times import parse_utc
from forecaster.errors import InputError

if TYPE_CHECKING:  # imported where used: `headroom trace --help` loads no store
    from controlplane.simulation.engine import MinuteRow
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


ModelsOption = Annotated[str | None, typer.Option(help=escape(
    "comma-separated models of the store's models table [default: every one]"))]
DaysOption = Annotated[float, float_option(help="length of the window in days", min=0.001,
                                           max=3650.0)]
TickUntilOption = Annotated[str | None, typer.Option(
    help="end (ISO-8601, UTC); default and latest: the start of the last tick's minute")]


def _checked(out: Path, until: str | None, config: Path | None, db: Path | None
             ) -> tuple[str, datetime | None]:
    """The store's URL and ``--until``; a bad option or an ``--out`` that is an input or cannot
    be written refused (exit 2) before the store is read."""
    from controlplane.cli.demo_store import settings_with_db
    from controlplane.settings import ConfigError

    try:
        until_at = None if until is None else parse_utc(until, "--until")
        url = settings_with_db(config, db).db.url
        check_output_path(out, "--out", {**store_files(url),
                                         **({"--config": config} if config else {})})
    except (InputError, ConfigError) as error:
        raise usage_error(str(error)) from None
    return url, until_at


def models_of(store: Store, models: str | None) -> list[str]:
    """``--models`` (each of the store's models table), or every model of the table."""
    from controlplane.cli.forecast_source import wanted_models

    known = store.model_names()
    wanted = wanted_models(models)
    if wanted == []:
        raise InputError(f"--models {models!r}: no model name; give comma-separated names or "
                         "leave it out for every model")
    unknown = [m for m in wanted or () if m not in known]
    if unknown:
        raise InputError(f"--models: model {unknown[0]!r} is not in the store's models table "
                         f"(models: {known})")
    return wanted or known


def recorded_minutes(store: Store, wanted: list[str], days: float, until_at: datetime | None
                     ) -> tuple[datetime, datetime, tuple[MinuteRow, ...]] | None:
    """The loop's minutes of ``wanted`` over ``days`` ending where the last tick's minute begins
    (or at ``until_at``), and that window; None without a tick or a model."""
    from controlplane import recorded_timeline, trace_export
    from controlplane.cost_reader import time_span

    span = time_span(store.engine)
    if span is None or not wanted:
        return None
    since_at, end_at = trace_export.export_window(*span, 60, days, until_at, "tick",
                                                  newest_step=False)
    return since_at, end_at, recorded_timeline.read_recorded(store.engine, wanted, since_at,
                                                             end_at)


def nothing(url: str, what: str, verb: str = "export") -> typer.Exit:
    from controlplane.store.engine import redact

    console.print(f"store {redact(url)} has no models or no {what} yet; nothing to {verb}",
                  markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(1)


def _write(out: Path, write: Callable[[Path], object]) -> None:
    try:
        write_atomically(out, write)
    except OSError as error:
        raise usage_error(f"--out {out}: cannot write: {error.strerror or error}") from None


@app.command("export")
def export(
    out: Annotated[Path, typer.Option("--out", "-o", help="trace CSV to write (ts,model,"
                                                          "rate_rps: simulate's default "
                                                          "columns)")],
    models: ModelsOption = None,
    until: Annotated[str | None, typer.Option(
        help="end (ISO-8601, UTC); default and latest: the step of the newest observation")]
    = None,
    days: DaysOption = 7.0,
    step_s: Annotated[int, typer.Option(help="seconds per row: the mean of the observations "
                                             "in each step", min=1, max=3600)] = 60,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Write each model's observed demand (requests/s, the mean per step) as a trace CSV."""
    from controlplane import trace_export

    try:
        _check_step(step_s)
    except InputError as error:
        raise usage_error(str(error)) from None
    url, until_at = _checked(out, until, config, db)

    def read(store: Store) -> tuple[datetime, datetime, tuple[TrafficSeries, ...]] | None:
        wanted = models_of(store, models)
        span = trace_export.observation_span(store)
        if span is None or not wanted:
            return None
        since_at, end_at = trace_export.export_window(*span, step_s, days, until_at,
                                                      "observation")
        return (since_at, end_at, tuple(store.rate_history(m, since_at, end_at, step_s)
                                        for m in wanted))

    got = with_existing_store(config, db, read)
    if got is None:
        raise nothing(url, "observed load")
    since_at, end_at, series = got
    text, rows = trace_export.trace_csv(series)
    for line in trace_export.gap_warnings(series):
        print_warning(line)
    _write(out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    written = sum(1 for s in series if s.observed_count())
    console.print(f"wrote {rows} rows of {written} model(s) to {out}: {since_at:%Y-%m-%d %H:%M} "
                  f".. {end_at:%Y-%m-%d %H:%M} UTC, a row per model and {step_s} s step",
                  markup=False, highlight=False, soft_wrap=True)


@app.command("timeline")
def timeline(
    out: Annotated[Path, typer.Option("--out", "-o", help="timeline CSV to write (simulate's "
                                                          "--timeline-out columns)")],
    models: ModelsOption = None,
    until: TickUntilOption = None,
    days: DaysOption = 7.0,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Write what the loop did, per minute and model, as simulate's timeline, and score it."""
    from controlplane.simulation.timeline import headline, write_timeline

    url, until_at = _checked(out, until, config, db)
    got = with_existing_store(config, db, lambda store: recorded_minutes(
        store, models_of(store, models), days, until_at))
    if got is None:
        raise nothing(url, "reconcile ticks")
    since_at, end_at, rows = got
    _write(out, lambda tmp: write_timeline(tmp, rows))
    score = headline(rows)
    ratio = score["gpu_hours_over_lower_bound"]
    console.print(f"wrote {len(rows)} rows ({score['minutes']} minutes) to {out}: "
                  f"{since_at:%Y-%m-%d %H:%M} .. {end_at:%Y-%m-%d %H:%M} UTC; "
                  f"{score['short_model_minutes']} short model-minutes "
                  f"({score['short_model_minutes_pct']:g} %), {score['gpu_hours']:,.1f} GPU-hours"
                  + ("" if ratio is None else f", {ratio:.3f} x the lower bound"),
                  markup=False, highlight=False, soft_wrap=True)
