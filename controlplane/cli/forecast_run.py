"""``headroom forecast run``: the forecast job (every model, or one shard of a fleet) over
Prometheus, a CSV trace or the store's observations; its report as a table or one JSON document.
"""

from __future__ import annotations

import errno
import json
import tempfile
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from controlplane.cli.demo_store import with_demo_hint, with_upgrade_for
from controlplane.cli.helptext import reflowed
from controlplane.cli.json_errors import JsonOption, write_document
from controlplane.cli.numbers import float_option
from controlplane.cli.store_origin import db_url_named
from controlplane.cli.streams import print_error, print_warning, usage_error
from controlplane.domain.errors import error_line
from controlplane.domain.timestamps import utc_text
from forecaster.errors import ForecasterError, InputError
from forecaster.methods import METHODS

if TYPE_CHECKING:  # imported where used: `headroom forecast --help` loads no pandas or store
    from controlplane.cli.forecast_csv import CsvCoverage
    from controlplane.forecast_job import JobReport

err = Console(stderr=True)


def cell(value: float | None, digits: int = 1) -> str:
    """A table cell: ``-`` for no value."""
    return "-" if value is None else f"{value:.{digits}f}"


@reflowed
def run(
    config: Annotated[Path | None, typer.Option("--config", "-c",
                                                help="YAML settings (store URL, forecast)")] = None,
    store_url: Annotated[str | None, typer.Option("--store", help="SQL store URL (default: "
                                                  "settings db.url)")] = None,
    prometheus_url: Annotated[str | None, typer.Option(
        "--prometheus-url", help="read rates from Prometheus (credentials, rate window and "
        "timeout: settings prometheus)")] = None,
    metric: Annotated[str | None, typer.Option(help="Prometheus preset: triton, vllm or sglang "
                                               "(default: settings prometheus.metric)")] = None,
    query: Annotated[str | None, typer.Option(help="PromQL with a {model} placeholder "
                                              "(default: settings prometheus.query)")] = None,
    models: Annotated[str | None, typer.Option(help="comma-separated model names "
                                               "(default: all the source knows)")] = None,
    csv: Annotated[Path | None, typer.Option("--csv", help="read rates from a CSV trace")] = None,
    time_col: Annotated[str, typer.Option("--time-col", help="--csv: time column")] = "ts",
    value_col: Annotated[str, typer.Option("--value-col", help="--csv: rate column")] = "rate_rps",
    series_col: Annotated[str | None, typer.Option(
        "--series-col", help="--csv: column naming the model ('' for one series)")] = "model",
    time_unit: Annotated[str | None, typer.Option(
        "--time-unit", help="--csv: unit of a numeric time column: s, ms, min, h")] = None,
    value_unit: Annotated[str, typer.Option(
        "--value-unit", help="--csv: unit of the rate column: rps | rpm | per-step (a count per "
        "trace step); converted to requests/s, as `headroom simulate` reads a trace")] = "rps",
    shard: Annotated[str, typer.Option(help="INDEX/COUNT of a sharded fleet, e.g. "
                                       "$(JOB_COMPLETION_INDEX)/8")] = "0/1",
    workers: Annotated[int | None, typer.Option(min=1, help="worker processes (default: "
                                                "settings forecast.workers)")] = None,
    fit_budget_s: Annotated[float | None, float_option(
        "--fit-budget-s", min=0, help="a first fit (a model without stored state) starts only "
        "within this many wall seconds of the run's start; the rest get persistence with "
        "fallback fit_deferred and are fitted by a later run. Whatever the budget (0 too), a "
        "run starts at least one first fit per worker, so every model is fitted in the end "
        "(default: settings forecast.fit_budget_s, else no limit)")] = None,
    method: Annotated[str | None, typer.Option(help="forecaster (default: settings)")] = None,
    horizon: Annotated[str | None, typer.Option(help="e.g. 20m (default: settings)")] = None,
    step: Annotated[str | None, typer.Option(help="e.g. 60s (default: settings)")] = None,
    history: Annotated[str | None, typer.Option(help="e.g. 7d (default: settings)")] = None,
    state_dir: Annotated[Path | None, typer.Option("--state-dir", help="fitted state kept "
                                                   "between runs (default: forecast.state_dir, "
                                                   ".headroom/forecaster-state)")] = None,
    at: Annotated[str | None, typer.Option(help="forecast origin (ISO UTC; default: now, the "
                                           "store's for its observations (a simulated "
                                           "fleet's last tick), or the end of --csv)")] = None,
    no_store: Annotated[bool, typer.Option("--no-store", help="do not save forecasts")] = False,
    json_out: JsonOption = False,
) -> None:
    """Refresh forecasts for every model (or one shard) and store them.

    Without --csv or --prometheus-url it forecasts the models the store lists from the history
    serve reads for them (backend kubernetes: Prometheus at prometheus.url; otherwise the
    store's observations), so scheduled runs can do serve's refreshes (set
    forecast.refresh_in_serve false; deploy/forecast-cronjob.yaml runs one shard per pod).

    A --csv trace's rates are converted to requests/s from --value-unit (rpm, or per-step: a
    count per trace step) as `headroom simulate` converts them. Stored, only the series the
    store's models table lists are forecast: each other series is named in a warning
    (not_in_models with --json), as is each model of the table without rows in the CSV
    (models_without_rows); a run with no series left stores nothing and says so (exit 0, as a
    run over no model). An empty models table stores every series, with a warning.

    Bad input is reported per model, never a silent zero: a CSV with a repeated timestamp is
    refused (exit 2); NaN/text, infinite (or above 1e15), negative and out-of-order rows,
    negative Prometheus values (a negative last one: the forecast starts from 0), and
    a newest sample more than max(1 h, 3 steps) before the forecast time (stale_history) are
    warnings per model (stderr, and per_model.warnings with --json); a model with no usable
    sample (none numeric, or none positive but some negative) gets no forecast and is listed as
    failed (exit 1).

    A run that could not save the fitted state of some models in the state dir (disk full,
    read-only, quota) prints one error line naming the state dir and the OS error and exits 3
    (when no model failed): their forecasts are made and stored, but every run refits them.
    A state dir the OS refuses to create or write at the start (read-only file system,
    permission denied, disk full, quota, I/O error) is a warning: the run reads and saves no
    state, fits every model (no fit budget: none would ever hold state), stores the forecasts
    and exits 3 as above. A path that cannot be a directory (it, or a parent, is a file; too
    long; a symlink loop) is refused before anything is fetched (exit 2).

    A store that cannot be opened, or fails while the run reads or writes it (unreachable, its
    connection dropped, a server failing over), is one error line naming the store and the
    database's error (exit 2, as deploy/forecast-cronjob.yaml expects of a store it cannot
    use: the next run tries again); only a table or column missing from it adds the hint to
    run `headroom db upgrade`. A --horizon shorter than the step is refused (exit 2; a number
    without a unit is seconds).
    """
    from sqlalchemy.exc import SQLAlchemyError

    from controlplane.cli.forecast_csv import coverage_warnings, csv_coverage, only_series
    from controlplane.cli.forecast_method import check_forecast_method, check_horizon
    from controlplane.cli.forecast_source import history_source, wanted_models
    from controlplane.forecast_job import JobConfig, Shard, run_job
    from controlplane.settings import ConfigError, load_settings
    from controlplane.store import StoreUnavailable
    from controlplane.store.configured import open_existing_store
    from controlplane.store.engine import missing_schema, redact
    from forecaster.prepare import parse_duration_s
    from forecaster.sources.replay import CsvSource

    try:
        settings = load_settings(config)
        if method is None:  # the setting's: named with the file or variable that set it
            check_forecast_method(settings, config)
        fs = settings.forecast
        job = JobConfig(
            horizon_s=parse_duration_s(horizon, "--horizon") if horizon else fs.horizon_s,
            step_s=parse_duration_s(step, "--step") if step else fs.step_s,
            history_s=parse_duration_s(history, "--history") if history else fs.history_s,
            method=method or fs.method, workers=workers or fs.workers, shard=Shard.parse(shard),
            state_dir=state_dir if state_dir is not None else fs.state_dir,
            fit_budget_s=fit_budget_s if fit_budget_s is not None else fs.fit_budget_s,
            state_retention_s=fs.state_retention_s)
        check_horizon(job.horizon_s, job.step_s, horizon, step)
        state_path = job.state_dir
        if job.method not in METHODS:
            raise InputError(f"--method {job.method!r}: choose one of {', '.join(METHODS)}")
        source, now = history_source(prometheus_url, settings, metric, query, models, csv,
                                     time_col, value_col, series_col, (time_unit, value_unit),
                                     store_url or settings.db.url, at, job.step_s)
        # checked before any fit, not after every model was fitted
        with db_url_named(settings) if store_url is None else nullcontext():
            sink = None if no_store else open_existing_store(settings.db, store_url)
        coverage = None
        if isinstance(source, CsvSource) and sink is not None:  # only the table's models
            coverage = csv_coverage(source.model_names(), sink.model_names(),
                                    wanted_models(models), job.shard)
            source = CsvSource(only_series(source.trace, coverage.stored))
        state_name = "--state-dir" if state_dir is not None else "forecast.state_dir"
        unwritable = _unwritable_state_dir(job.state_dir, state_name)
        if unwritable:  # no state read or saved: every model fits, none is deferred
            print_warning(f"{state_name} {job.state_dir}: cannot write there ({unwritable}); "
                          "every model is fitted without stored state, none is saved")
            job = replace(job, state_dir=None, fit_budget_s=None)
        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=err)
        bars: dict[str, Any] = {}

        def on_progress(stage: str, done: int, total: int) -> None:
            if stage not in bars:
                progress.start()  # at the first stage: an error before it stays one line
                bars[stage] = progress.add_task(stage, total=total)
            progress.update(bars[stage], completed=done)

        try:
            report_ = run_job(source, sink, now, job, on_progress)
        finally:
            if bars:  # stop() prints a line break on a non-terminal, started or not
                progress.stop()
        if unwritable:
            report_ = replace(report_, state_unsaved=len(report_.forecasts),
                              state_error=unwritable)
    except StoreUnavailable as exc:  # --store's is named by URL: no demo store instead
        raise usage_error(str(with_upgrade_for(exc, store_url) if store_url is not None
                              else with_demo_hint(exc, settings))) from exc
    except (ForecasterError, ConfigError, ValueError) as exc:
        raise usage_error(str(exc)) from exc
    except SQLAlchemyError as exc:  # the store failed mid-run: exit 2, as one not opened
        line = error_line(exc)
        hint = " (is the schema created? run `headroom db upgrade`)" if missing_schema(
            line) else ""
        raise usage_error(f"store {redact(store_url or settings.db.url)}: {line}{hint}"
                          ) from exc
    doc = job_doc(report_, stored=not no_store, coverage=coverage)
    if json_out:
        write_document(json.dumps(doc, indent=2, allow_nan=False))
    else:
        Console().print(job_table(report_))
        err.print(f"{len(report_.forecasts)} forecast(s) in {report_.wall_s:.1f} s "
                  f"(fetch {report_.fetch_s:.1f}, compute {report_.compute_s:.1f}, "
                  f"store {report_.store_s:.1f}); refits {report_.refits}, reused "
                  f"{report_.reused}, deferred {report_.deferred}; failed "
                  f"{len(report_.failed)}; pruned {report_.pruned} state file(s)",
                  highlight=False)
    for model, notes in report_.warnings.items():
        for note in notes:
            print_warning(f"model {model!r}: {note}")
    for model, why in report_.failed.items():
        print_warning(f"model {model!r}: {why}")
    for line in coverage_warnings(coverage, str(csv)) if coverage else ():
        print_warning(line)
    if report_.state_unsaved:
        print_error(state_unsaved_line(report_, state_path, state_name, stored=not no_store))
    if report_.failed:
        raise typer.Exit(1)
    if report_.state_unsaved:
        raise typer.Exit(EXIT_STATE_UNSAVED)


#: ``forecast run``'s exit code when every model has a forecast but the fitted state of some
#: could not be saved (1: some models have no forecast; 2: bad input)
EXIT_STATE_UNSAVED = 3


#: what the OS says of a state dir it will not write to, as of a disk that fills up during a
#: run: a run goes on without stored state and exits 3. Any other error (a file where the
#: directory or one of its parents should be, a name too long, a symlink loop) is a wrong path,
#: refused before the run (exit 2).
STATE_STORAGE_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC,
                                  errno.EDQUOT, errno.EFBIG, errno.EIO})


def _unwritable_state_dir(state_dir: Path | None, name: str) -> str:
    """Why ``state_dir`` (created if missing, with its parents) takes no writes when the OS
    refuses them (``STATE_STORAGE_ERRNOS``: the OS error), else ''. A path that cannot be a
    writable directory whatever the storage is a config error (``InputError``)."""
    if state_dir is None:
        return ""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=state_dir):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno in STATE_STORAGE_ERRNOS:
            return why
        if state_dir.exists() and not state_dir.is_dir():
            why = "a file, not a directory"
        raise InputError(f"{name} {state_dir}: cannot write there ({why})") from exc
    return ""


def state_unsaved_line(r: JobReport, state_dir: Path | None, name: str, stored: bool) -> str:
    """The one line on a run whose fitted state could not be saved (``r.state_unsaved``)."""
    made = "stored" if stored and r.forecasts else "made"
    return (f"{name} {state_dir}: cannot save fitted state ({r.state_error}) of "
            f"{r.state_unsaved} of {r.models} model(s); their forecasts were {made}, but every "
            "run refits them until the state dir takes writes again")


def job_doc(r: JobReport, stored: bool, coverage: CsvCoverage | None = None) -> dict[str, Any]:
    """The run's JSON document; ``coverage``: a --csv run's series against the models table
    (without it, e.g. Prometheus or --no-store, its keys are empty)."""
    return {
        "ok": not (r.failed or r.state_unsaved), "computed_at": utc_text(r.computed_at),
        "shard": f"{r.shard.index}/{r.shard.count}", "models": r.models,
        "forecasts": len(r.forecasts), "stored": stored and bool(r.forecasts),
        "failed": r.failed, "refits": r.refits, "reused_state": r.reused,
        "deferred": r.deferred, "seasonal_fits": r.seasonal_fits,
        "state_unsaved": r.state_unsaved, "state_error": r.state_error or None,
        "pruned_state_files": r.pruned,
        **(coverage.as_doc() if coverage else
           {"not_in_models": [], "models_without_rows": [], "models_table_empty": None}),
        "methods": r.methods, "fallbacks": r.fallbacks,
        "timing_s": {"fetch": round(r.fetch_s, 3), "compute": round(r.compute_s, 3),
                     "store": round(r.store_s, 3), "wall": round(r.wall_s, 3)},
        "per_model": {f.series_id: {"method": f.method, "fallback_reason": f.fallback_reason,
                                    "backtest_wape_pct": f.backtest_wape,
                                    "p50_last": f.p50[-1] if f.p50 else None,
                                    "p90_max": f.p90_max(),
                                    "warnings": list(r.warnings.get(f.series_id, ()))}
                      for f in r.forecasts},
    }


def job_table(r: JobReport) -> Table:
    """The run's forecasts; model names are shown as written (not read as Rich markup)."""
    t = Table(title=f"forecasts at {utc_text(r.computed_at)} (shard {r.shard.index}/"
                    f"{r.shard.count})")
    for col in ("model", "method", "fallback", "p50 @ horizon", "p90 max", "recent WAPE %",
                "warnings"):
        t.add_column(col)
    for f in r.forecasts:
        t.add_row(escape(f.series_id), f.method, escape(f.fallback_reason or "-"),
                  cell(f.p50[-1], 2), cell(f.p90_max(), 2), cell(f.backtest_wape),
                  str(len(r.warnings[f.series_id])) if f.series_id in r.warnings else "-")
    return t
