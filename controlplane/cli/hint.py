"""``headroom hint``: demand announced ahead (a launch, a campaign, a batch job). Each reconcile
tick floors the model's forecast with the hints whose window meets a forecast step
(``controlplane.autoscaling.hints``), so the fleet is ready when the announced demand arrives;
the loop picks a hint up once its window is within the forecast's 20 minutes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from controlplane.cli.demo_store import settings_with_db
from controlplane.cli.json_errors import JsonOption, write_document
from controlplane.cli.numbers import float_option
from controlplane.cli.store_origin import ConfigOption, DbOption, with_existing_store
from controlplane.cli.store_time import now_of
from controlplane.cli.streams import print_warning
from controlplane.cli.times import parse_utc
from controlplane.domain.hints import MAX_HINT_RPS, DemandHint, HintError, new_hint
from controlplane.domain.timestamps import utc_text
from forecaster.errors import InputError

if TYPE_CHECKING:  # imported where used: `headroom hint --help` loads no store or numpy
    from controlplane.autoscaling.hint_capacity import HintCheck
    from controlplane.domain.store_clock import StoreNow
    from controlplane.store import Store

app = typer.Typer(help="Demand announced ahead: floors on a model's forecast over a window.",
                  no_args_is_help=True)
out = Console()
EPOCH_AT = datetime(1970, 1, 1, tzinfo=UTC)


@app.callback()
def hint() -> None:
    """Demand announced ahead: floors on a model's forecast over a window."""


@app.command("add")
def add(
    model: Annotated[str, typer.Argument(metavar="MODEL",
                                         help="a model of the store's models table")],
    rps: Annotated[float, float_option("--rps", help="requests/s the model will see at least",
                                       min=0.0, min_open=True, max=MAX_HINT_RPS)],
    end: Annotated[str, typer.Option("--end", help="end of the window (ISO-8601; UTC unless "
                                                   "it names a zone)")],
    start: Annotated[str | None, typer.Option("--start", help=escape(
        "start of the window (ISO-8601; UTC unless it names a zone) [default: now]"))] = None,
    reason: Annotated[str, typer.Option(help="why, for whoever reads the plan")] = "",
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Announce that MODEL will see at least --rps from --start until --end.

    Adding a hint that is already stored and not ended (same model, --rps, window and \
--reason; without --start, one that has started) prints that hint, not a second copy. \
With --config, a hint over what its pools and GPU budgets can ever hold for MODEL is \
stored all the same, with a warning: line naming the limit, counted on the throughput per \
replica the loop sizes with (the profile the last tick corrected, with \
autoscaling.profile_correction on). A hint on a paused model is stored with a warning: line \
saying the pause holds until `headroom models resume`."""
    from controlplane.autoscaling.from_settings import known_capacity
    from controlplane.cli.status_view import hint_line
    from controlplane.hint_checks import hint_checker
    from controlplane.store.hints import SqlDemandHints

    def work(store: Store) -> tuple[DemandHint, HintCheck]:
        now = now_of(store)
        start_at = _start_at(start) if start is not None else now.at
        end_at = parse_utc(end, "--end")
        specs = {s.name: s for s in store.model_specs()}
        try:
            hint_ = new_hint(model, rps, start_at, end_at, reason, set(specs), now)
        except HintError as error:
            if error.field == "window" and end_at <= start_at:  # the domain's words: end_at
                raise InputError(f"--end {end}: not after --start "  # and start_at, not options
                                 f"{start if start is not None else 'now'}") from None
            named = {"end": f"--end {end}: ", "reason": "--reason: ", "rate_rps": "--rps: ",
                     "window": "--start/--end: "}.get(error.field, "")
            raise InputError(f"{named}{error}") from None
        added_ = SqlDemandHints(store.engine).add_hint(hint_, now.at, starts_now=start is None)
        # only --config names the fleet's pools and budgets (serve's settings); without it
        # the settings' pools are the defaults, no fleet's: no capacity is checked or said
        # (a pause is the store's: said either way)
        known = None if config is None else known_capacity(settings_with_db(config, db))
        return added_, hint_checker(store, known)(hint_)

    added, check = with_existing_store(config, db, work)
    out.print(hint_line(added), markup=False, highlight=False, soft_wrap=True)
    for warning in check.warnings():
        print_warning(f"hint {added.hint_id}: {warning}")


def _start_at(start: str) -> datetime:
    """--start as a time, refused before 1970 as the DemandHints API refuses its start_unix_s
    (``0001-01-01`` was stored and listed as ``1-01-01 00:00``): a start already past means the
    hint is in force from now on, and no fleet's history reaches back before 1970."""
    start_at = parse_utc(start, "--start")
    if start_at < EPOCH_AT:
        raise InputError(f"--start {start}: before 1970-01-01T00:00:00Z (leave --start out "
                         "for a hint in force from now)")
    return start_at


@app.command("list")
def list_hints(
    all_: Annotated[bool, typer.Option("--all", help="include hints that have ended")] = False,
    json_out: JsonOption = False,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """The hints that have not ended (all with --all), by start.

    A hint whose model the models table does not list (`models remove --keep-hints`) is \
marked "model not listed"."""
    from controlplane.cli.status_view import HINT_COLUMNS, hint_cells
    from controlplane.store.hints import SqlDemandHints

    def read(store: Store) -> tuple[tuple[DemandHint, ...], set[str], StoreNow]:
        now = now_of(store)
        return (SqlDemandHints(store.engine).hints(None if all_ else now.at),
                set(store.model_names()), now)

    hints, listed, now = with_existing_store(config, db, read)
    if json_out:
        write_document(json.dumps([{
            "id": h.hint_id, "model": h.model, "model_listed": h.model in listed,
            "rate_rps": h.rate_rps, "start_at": utc_text(h.start_at),
            "end_at": utc_text(h.end_at), "reason": h.reason} for h in hints], indent=1))
        return
    if not hints:
        out.print("no demand hints" + ("" if all_ else f" in force or ahead at {now.text()} "
                                                       "(--all: ended too)"))
        return
    table = Table(title=None if all_ else f"in force or ahead at {now.text()}",
                  title_justify="left")
    for column in HINT_COLUMNS:
        table.add_column(column, overflow="fold")  # whole model names, not "org-team/very-lon…"
    for h in hints:
        table.add_row(*hint_cells(h, h.model in listed))
    out.print(table)
    unlisted = sorted({h.model for h in hints} - listed)
    if unlisted:
        it = "it" if len(unlisted) == 1 else "them"
        out.print(f"model not listed: {', '.join(unlisted)} (the models table does not list "
                  f"{it}; the hints apply again once `headroom models import` lists {it}; "
                  "`headroom hint remove ID` withdraws one)", markup=False, highlight=False,
                  soft_wrap=True)


@app.command("remove")
def remove(
    hint_id: Annotated[int, typer.Argument(metavar="ID", help="the hint's id (hint list)")],
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Withdraw one hint; the next tick sizes the model from its forecast alone."""
    from controlplane.cli.status_view import hint_line
    from controlplane.store.hints import SqlDemandHints

    def work(store: Store) -> DemandHint:
        removed = SqlDemandHints(store.engine).remove_hint(hint_id)
        if removed is None:
            raise InputError(f"no demand hint with id {hint_id} (see `headroom hint list --all`)")
        return removed

    removed = with_existing_store(config, db, work)
    out.print(f"removed {hint_line(removed)}", markup=False, highlight=False, soft_wrap=True)
