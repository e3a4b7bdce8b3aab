"""``headroom``: the command line (Typer + Rich). Errors are one line naming the field, file or
URL at fault, with exit code 2; never a traceback for bad input."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from controlplane.cli.cost import app as cost_app
from controlplane.cli.dashboard_command import dashboard
from controlplane.cli.db_revision import db_current, db_history
from controlplane.cli.db_upgrade import db_upgrade
from controlplane.cli.demo_command import demo
from controlplane.cli.downgrade import db_downgrade
from controlplane.cli.error_lines import UsageError, file_error_line, one_line_errors
from controlplane.cli.fleet import app as fleet_app
from controlplane.cli.forecast import app as forecast_app
from controlplane.cli.helptext import reflowed
from controlplane.cli.hint import app as hint_app
from controlplane.cli.json_errors import JsonErrorsGroup, one_document_on_failure
from controlplane.cli.models import app as models_app
from controlplane.cli.placement import app as placement_app
from controlplane.cli.serve_command import serve
from controlplane.cli.simulate import simulate_command
from controlplane.cli.status import status_command
from controlplane.cli.streams import print_error
from controlplane.cli.trace import app as trace_app
from controlplane.cli.trace_replay import replay as trace_replay

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
db_app.command("upgrade")(db_upgrade)
# a relative target such as -1 is a REVISION, not an option (unknown options reach it too and
# are refused there as unknown revisions)
db_app.command("downgrade", context_settings={"ignore_unknown_options": True})(
    reflowed(db_downgrade))
app.add_typer(placement_app, name="placement")
app.add_typer(forecast_app, name="forecast")
app.add_typer(cost_app, name="cost")
app.add_typer(hint_app, name="hint")
app.add_typer(models_app, name="models")
app.add_typer(fleet_app, name="fleet")
app.add_typer(trace_app, name="trace")
trace_app.command("replay")(reflowed(trace_replay))
app.command("simulate")(reflowed(simulate_command))
app.command()(demo)
app.command()(serve)
app.command()(dashboard)
app.command("status")(reflowed(status_command))


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
            if isinstance(error, one_line_errors()):
                print_error(str(error))
                sys.exit(2)
            if isinstance(error, OSError) and error.filename is not None:
                print_error(file_error_line(error))
                sys.exit(2)
            raise
