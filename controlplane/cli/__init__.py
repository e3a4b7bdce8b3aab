"""``headroom``: the command line (Typer + Rich). Errors are one line naming the field, file or
URL at fault, with exit code 2; never a traceback for bad input."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from controlplane.adapters.clock import WallClock
from controlplane.cli.child import run_in_foreground
from controlplane.cli.cost import app as cost_app
from controlplane.cli.db_revision import db_current, db_history
from controlplane.cli.demo_store import DEMO_DB, demo_settings, settings_with_db
from controlplane.cli.downgrade import db_downgrade
from controlplane.cli.forecast import app as forecast_app
from controlplane.cli.helptext import reflowed
from controlplane.cli.hint import app as hint_app
from controlplane.cli.json_errors import (
    JsonErrorsGroup,
    json_option,
    one_document_on_failure,
    write_document,
)
from controlplane.cli.models import app as models_app
from controlplane.cli.numbers import float_option
from controlplane.cli.placement import app as placement_app
from controlplane.cli.simulate import simulate_command
from controlplane.cli.status import status_command
from controlplane.cli.store_origin import DbOption, db_url_named, refuse_in_memory
from controlplane.cli.streams import print_error, stdout_to_stderr
from controlplane.cli.times import parse_utc
from controlplane.logsetup import setup_logging
from controlplane.startup_lines import print_demo_start, print_line
from forecaster.errors import InputError
from scheduler.metrics import check_bindable, host_and_port

if TYPE_CHECKING:
    from controlplane.demo import Demo
    from controlplane.settings import Settings

# Commands import what they run in their bodies: `headroom --help`, and each command, load only
# what the command invoked needs (not pandas, SQLAlchemy, gRPC, ... for every command).

app = typer.Typer(help="Headroom: forecast, pack and actuate GPU inference fleets.",
                  cls=JsonErrorsGroup, no_args_is_help=True, pretty_exceptions_enable=False,
                  add_completion=False)
#: the distribution whose version ``headroom --version`` shows (pyproject.toml's project name)
DISTRIBUTION = "headroom"


def _show_version(shown: bool) -> None:
    """``--version``: ``headroom <version>`` of the installed distribution, then exit 0."""
    if not shown:
        return
    from importlib import metadata

    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise UsageError(f"the {DISTRIBUTION} distribution is not installed (pip install -e .): "
                         "no version to show") from None
    typer.echo(f"headroom {version}")
    raise typer.Exit


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_show_version,
        help="Show the version and exit.")] = False) -> None:
    pass


db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)
app.add_typer(db_app, name="db")
db_app.command("current")(reflowed(db_current))
db_app.command("history")(reflowed(db_history))
app.add_typer(placement_app, name="placement")
app.add_typer(forecast_app, name="forecast")
app.add_typer(cost_app, name="cost")
app.add_typer(hint_app, name="hint")
app.add_typer(models_app, name="models")
app.command("simulate")(reflowed(simulate_command))

console = Console(stderr=True)
#: a directory, like a missing file, is load_settings' one line, the same for every command
ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="YAML settings file")]


class UsageError(Exception):
    """A one-line error for the user (exit code 2)."""


def _wall_now() -> datetime:
    return WallClock().now()


def _settings(config: Path | None, **overrides: object) -> Settings:
    from controlplane.settings import load_settings

    return load_settings(config, **{k: v for k, v in overrides.items() if v is not None})


def _check_listen_addresses(settings: Settings, config: Path | None,
                            ports_free: bool = False) -> None:
    """Fail before a store or a log is touched when an address to serve on cannot be bound
    here (an unknown host, one of another machine, a port above 65535) or, with
    ``ports_free``, when its port is taken (the demo takes a free one instead)."""
    from controlplane.placement_api import check_security_files
    from controlplane.settings import ConfigError

    placement = settings.placement
    addresses = (("placement.listen", placement.listen),
                 ("placement.metrics_listen", placement.metrics_listen),
                 ("placement.health_listen", placement.health_listen))
    for field, listen in addresses:
        if listen is not None:
            try:
                check_bindable(listen, port_free=ports_free)
            except ValueError as error:
                raise ConfigError(f"{config or 'configuration'}: {field}: {error}") from None
    check_security_files(placement, str(config or "configuration"))
    for i, (field, listen) in enumerate(addresses):
        for earlier, taken in addresses[:i]:
            if ports_free and listen is not None and taken is not None \
                    and _same_port(taken, listen):
                raise ConfigError(f"{config or 'configuration'}: {field}: {listen!r} is the "
                                  f"port of {earlier} {taken!r}; serve it on another port")


def _same_port(one: str, other: str) -> bool:
    """Whether two checked ``HOST:PORT`` addresses would bind the same port (0 never does)."""
    (host_a, port_a), (host_b, port_b) = host_and_port(one), host_and_port(other)
    anywhere = {"0.0.0.0", "[::]", "::", "*"}
    return port_a == port_b != 0 and (host_a == host_b or bool({host_a, host_b} & anywhere))


@db_app.command("upgrade")
def db_upgrade(config: ConfigOption = None,
               revision: Annotated[str, typer.Argument(
                   metavar="REVISION", help="target revision")] = "head",
               db: DbOption = None) -> None:
    """Apply Alembic migrations up to REVISION (default: head)."""
    from controlplane.store import MigrationError, upgrade
    from controlplane.store.configured import open_store
    from controlplane.store.engine import redact, sqlite_file

    settings = settings_with_db(config, db)
    refuse_in_memory(settings.db.url)
    store_file = sqlite_file(settings.db.url)
    new_file = store_file is not None and not store_file.exists()
    with db_url_named(settings):
        store = open_store(settings.db)
    try:
        upgrade(store.engine, revision, settings.db.migration_lock_wait_s)
    except MigrationError:
        if new_file and store_file is not None:  # an unknown revision: leave no empty store
            store.engine.dispose()
            store_file.unlink(missing_ok=True)
        raise
    console.print(f"database {redact(settings.db.url)} upgraded to {revision}", soft_wrap=True,
                  markup=False, highlight=False)  # the URL whole: copied as it is shown


# a relative target such as -1 is a REVISION, not an option (unknown options reach it too and
# are refused there as unknown revisions)
db_app.command("downgrade", context_settings={"ignore_unknown_options": True})(
    reflowed(db_downgrade))


#: the fastest live demo: a 0.05 s sim step (controlplane.demo) is then 500 simulated s, some
#: 17 reconcile intervals; faster, the clock outruns the loop (inf stood still, 1e12 overran
#: datetime's year 9999 and the demo never stopped)
MAX_DEMO_SPEED = 10_000.0
#: the years of ``demo --start``: room for the backfilled history before it and for the
#: simulated clock after it
DEMO_YEARS = (1971, 9998)


@app.command()
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
    _check_listen_addresses(settings, config)
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


@app.command()
def serve(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML settings file")],
    dry_run: Annotated[bool, typer.Option("--dry-run",
                                          help="plan and record, never apply")] = False,
) -> None:
    """Production: reconcile jobs + gRPC placement API against the configured backend."""
    from controlplane.cli.forecast_method import check_forecast_method
    from controlplane.forecast_refresh import check_state_dir
    from controlplane.jobs import stop_on_sigterm
    from controlplane.reconcile_config import check_autoscaling_models
    from controlplane.serve import check_models, run_serve
    from controlplane.sim.catalog import DEMO_MODELS

    settings = _settings(config)
    check_forecast_method(settings, config)
    _check_listen_addresses(settings, config, ports_free=True)
    with db_url_named(settings):
        check_models(settings)  # reads only: before the state dir and the store are made
    if settings.backend == "sim":  # its models are known before the store is opened
        check_autoscaling_models(settings.autoscaling, DEMO_MODELS)
    check_state_dir(settings.forecast.state_dir)  # makes it: after the checks that make nothing
    if dry_run:
        settings = settings.model_copy(update={"safety": settings.safety.model_copy(
            update={"dry_run": True})})
    setup_logging(logging.INFO)
    stop_event = stop_on_sigterm()  # before anything starts: a stop while starting is clean
    with db_url_named(settings):
        run_serve(settings, console, stop_event)


@app.command()
def dashboard(config: ConfigOption = None,
              port: Annotated[int | None, typer.Option(
                  help=escape("port to serve on [default: dashboard.port, 8501]"), min=0,
                  max=65535)] = None,
              address: Annotated[str | None, typer.Option(
                  help=escape("address to bind [default: dashboard.address, 127.0.0.1]"))] = None,
              db: DbOption = None,
              ) -> None:
    """The Streamlit dashboard over the configured store (read-only)."""
    from controlplane.demo import dashboard_command, port_or_free
    from controlplane.store.configured import open_store
    from controlplane.store.engine import check_known_revision, redact, sqlite_file

    settings = settings_with_db(config, db)
    store_file = sqlite_file(settings.db.url)
    if store_file is None or store_file.exists():  # a missing one: the pages say what to do
        with db_url_named(settings):  # fail fast, one line
            engine = open_store(settings.db).engine
        try:  # a store a newer Headroom migrated: its pages could misread it
            check_known_revision(engine, settings.db.url)
        finally:
            engine.dispose()
    address = address or settings.dashboard.address
    port_named = "--port" if port is not None else f"{config or 'configuration'}: dashboard.port"
    port = port if port is not None else settings.dashboard.port
    try:
        check_bindable(f"{address}:{port}")
    except ValueError as error:
        where = "--address" if address != settings.dashboard.address else (
            f"{config or 'configuration'}: dashboard.address")
        raise UsageError(f"{where} {address}: {error}") from None
    if port == 0:  # a free one now, so that the line below names the port Streamlit serves on
        port = port_or_free(address, 0)
    try:  # else Streamlit exits on its own line after ours named a URL another server may hold
        check_bindable(f"{address}:{port}", port_free=True)
    except ValueError as error:
        raise UsageError(f"{port_named} {port}: {error}") from None
    print_line(console, f"dashboard on http://{address}:{port} (store {redact(settings.db.url)})")
    env = dashboard_environment(os.environ, settings.db.url, config)
    raise typer.Exit(run_in_foreground(dashboard_command(address, port), env))


def dashboard_environment(environ: Mapping[str, str], db_url: str,
                          config: Path | None) -> dict[str, str]:
    """The Streamlit child's environment: ``environ`` with the store URL the command checked,
    and the settings file it loaded (its pages load the same one, so ``reconcile.interval_s``,
    ``dashboard.query_timeout_s`` and the ``db`` timeouts are the file's), or none."""
    from controlplane.settings import CONFIG_FILE_ENV

    env = {key: value for key, value in environ.items() if key != CONFIG_FILE_ENV}
    env["HEADROOM_DB__URL"] = db_url
    if config is not None:  # absolute: the child's working directory is not this one's concern
        env[CONFIG_FILE_ENV] = str(config.absolute())
    return env


app.command("status")(reflowed(status_command))

#: characters of a file name an ``error:`` line shows before cutting it short
SHOWN_FILENAME_CHARS = 60


def _file_error_line(error: OSError) -> str:
    """``FILE: what went wrong`` of an OSError about a file, a very long name cut short."""
    filename = error.filename
    name = os.fsdecode(filename) if isinstance(filename, str | bytes) else str(filename)
    if len(name) > SHOWN_FILENAME_CHARS:
        name = name[:SHOWN_FILENAME_CHARS] + "…"
    return f"{name}: {error.strerror or error}"


def main() -> None:
    """Console-script entry: map expected errors to one line and exit code 2.

    An OSError about a file no command checked for (e.g. a name too long for the file system)
    is the file given on the command line or in a settings file: one line naming it; any other
    OSError keeps its traceback. With --json, a failure prints its one JSON document too
    (``controlplane.cli.json_errors``)."""
    with one_document_on_failure(sys.argv[1:]):
        try:
            app()
        except Exception as error:
            if isinstance(error, _one_line_errors()):
                print_error(str(error))
                sys.exit(2)
            if isinstance(error, OSError) and error.filename is not None:
                print_error(_file_error_line(error))
                sys.exit(2)
            raise


#: the errors ``main`` prints as one line, by the module defining them; commands import their
#: modules as they run (not at every start), and a module never imported raised none of them
ONE_LINE_ERRORS = {"controlplane.settings": ("ConfigError",),
                   "controlplane.store.engine": ("StoreUnavailable", "MigrationError"),
                   "controlplane.serve": ("ServeError",),
                   "controlplane.fleet_lease": ("FleetLeaseHeld",)}


def _one_line_errors() -> tuple[type[Exception], ...]:
    """UsageError and the errors of ``ONE_LINE_ERRORS`` whose modules are imported."""
    imported = [sys.modules.get(name) for name in ONE_LINE_ERRORS]
    return (UsageError, *(getattr(module, error) for module, errors in
                          zip(imported, ONE_LINE_ERRORS.values(), strict=True)
                          if module is not None for error in errors))
