"""``headroom demo``: everything embedded (forecasts, the placement API, the reconcile jobs and
the dashboard) on a simulated GPU fleet over SQLite. Its options and their checks (``--start``:
``demo_start``), and the run itself: live at ``--speed``, or as fast as it goes with
``--minutes N --no-dashboard``, stopped cleanly by Ctrl-C or SIGTERM."""

from __future__ import annotations

import json
import logging
import signal
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from controlplane.adapters.clock import WallClock
from controlplane.cli.demo_store import DEMO_DB, demo_settings
from controlplane.cli.error_lines import UsageError
from controlplane.cli.helptext import reflowed
from controlplane.cli.json_errors import json_option, write_document
from controlplane.cli.listen_addresses import check_listen_addresses
from controlplane.cli.numbers import float_option
from controlplane.cli.store_origin import ConfigOption, db_url_named
from controlplane.cli.streams import stdout_to_stderr
from controlplane.cli.times import parse_utc
from controlplane.logsetup import setup_logging
from controlplane.startup_lines import print_demo_start, print_line
from forecaster.errors import InputError

if TYPE_CHECKING:
    from controlplane.demo import Demo
    from controlplane.settings import Settings

console = Console(stderr=True)


def _wall_now() -> datetime:
    return WallClock().now()


#: the fastest live demo: a 0.05 s sim step (controlplane.demo) is then 500 simulated s, some
#: 17 reconcile intervals; faster, the clock outruns the loop (inf stood still, 1e12 overran
#: datetime's year 9999 and the demo never stopped)
MAX_DEMO_SPEED = 10_000.0
#: the years of ``demo --start``: room for the backfilled history before it and for the
#: simulated clock after it
DEMO_YEARS = (1971, 9998)


@reflowed
def demo(
    minutes: Annotated[float | None, float_option(help="simulated minutes to run, then stop",
                                                  min=0)] = None,
    speed: Annotated[float, float_option(
        help="simulated seconds per wall second (for as fast as it goes: --minutes N "
             "--no-dashboard)", min=0.1, max=MAX_DEMO_SPEED)] = 30.0,
    no_dashboard: Annotated[bool, typer.Option("--no-dashboard",
                                               help="do not start the dashboard")] = False,
    json_out: Annotated[bool, json_option("print one JSON summary")] = False,
    db: Annotated[Path | None, typer.Option(
        help=escape("SQLite file of the demo store; beats HEADROOM_DB__URL and db.url of "
                    f"--config [default (with neither): {DEMO_DB}]"))] = None,
    start: Annotated[str | None, typer.Option(help=escape(
        "simulated start of a new store (ISO-8601; UTC unless it names a zone; floored to the "
        "minute): runs from one start see the same traffic and give the same summary "
        "[default: now]; a store resumed goes on from its last tick"))] = None,
    config: ConfigOption = None,
) -> None:
    """Everything embedded, on a simulated GPU fleet and SQLite.

    Forecasts, the placement API, the reconcile jobs and the dashboard run on a simulated fleet
    over SQLite. With --minutes N --no-dashboard it runs N simulated minutes as fast as it can."""
    from controlplane.cli.forecast_method import check_forecast_method
    from controlplane.forecast_refresh import check_state_dir
    from controlplane.reconcile_config import check_autoscaling_models
    from controlplane.settings import ConfigError
    from controlplane.sim.catalog import DEMO_MODELS
    from controlplane.sim_start import check_sim_store
    from controlplane.store.engine import in_memory

    settings = demo_settings(config, db)
    start_at = _wall_now() if start is None else demo_start(start)
    if in_memory(settings.db.url) and not no_dashboard:
        raise ConfigError(f"db.url {settings.db.url}: the dashboard runs in its own process and "
                          "cannot see an in-memory database; use sqlite:///FILE (or --db), or "
                          "--no-dashboard")
    check_forecast_method(settings, config)
    check_listen_addresses(settings, config)
    check_autoscaling_models(settings.autoscaling, DEMO_MODELS)  # no store yet
    with db_url_named(settings):  # reads only: a real fleet's store is refused as it was
        check_sim_store(settings)
    check_state_dir(settings.forecast.state_dir)  # makes it: after the checks that make nothing
    setup_logging(logging.INFO, log_file=Path(".headroom/demo.log"))
    with stdout_to_stderr(enabled=json_out), db_url_named(settings):
        runner = _run_demo(settings, start_at, minutes, speed, no_dashboard, json_out)
    summary = runner.summary()
    if json_out:
        write_document(json.dumps(summary.as_dict()))
    else:
        print_line(console, summary.line())


def demo_start(value: str) -> datetime:
    """``--start``: an ISO-8601 time of a year the demo simulates (with room for its history
    before, and its clock after); UsageError naming the option otherwise."""
    try:
        start_at = parse_utc(value, "--start")
    except InputError as error:
        raise UsageError(str(error)) from None
    if not DEMO_YEARS[0] <= start_at.year <= DEMO_YEARS[1]:
        raise UsageError(f"--start {value}: not in the years the demo simulates "
                         f"({DEMO_YEARS[0]} to {DEMO_YEARS[1]})")
    return start_at


def _run_demo(settings: Settings, start_at: datetime, minutes: float | None, speed: float,
              no_dashboard: bool, json_out: bool) -> Demo:
    from controlplane.demo import Demo
    from controlplane.store.engine import redact

    # Ctrl-C and SIGTERM stop the demo through the same flag, also when SIGINT came in ignored
    # (a process started in the background by a script, or by a parent that ignores it), and
    # from before it starts: a stop while it opens its store lets it finish starting, then stop
    # (not a KeyboardInterrupt halfway, its fleet lease held until it runs out)
    stopping = threading.Event()
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: stopping.set())
    runner = Demo(settings, start_at, stopping)
    try:
        grpc_address = runner.start_grpc()
        if not json_out:
            print_demo_start(console, redact(settings.db.url), grpc_address, runner.metrics_url)
        if no_dashboard and minutes is not None:
            _run_fast(runner, minutes, quiet=json_out)
        else:
            if not no_dashboard:
                url = runner.start_dashboard()
                if not json_out:
                    print_line(console, f"dashboard on {url}")
            if not json_out:
                console.print("Ctrl-C stops the demo cleanly.")
            _run_live(runner, speed, minutes, quiet=json_out)
    except KeyboardInterrupt:
        runner.request_stop()
    finally:
        runner.shutdown()
    return runner


def _run_fast(runner: Demo, minutes: float, quiet: bool) -> None:
    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed:.0f}/"
                  "{task.total:.0f} min"), TimeElapsedColumn(), console=console,
                  disable=quiet) as progress:
        task = progress.add_task("sim", total=int(minutes))
        runner.run_fast(minutes, on_minute=lambda m: progress.update(task, completed=m))


def _run_live(runner: Demo, speed: float, minutes: float | None, quiet: bool) -> None:
    with console.status("starting", spinner="dots") as status:
        def show() -> None:
            if quiet:
                return
            s = runner.summary()
            status.update(f"sim {s.sim_minutes:6.1f} min | ticks {s.ticks} | GPUs {s.gpus} | "
                          f"served {100 * s.served_share:.2f}% | {s.gpu_hours:.1f} GPU-h")
        runner.run_live(speed, minutes, on_second=show)
