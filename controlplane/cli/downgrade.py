"""``headroom db downgrade REVISION``: reverting migrations drops the tables and columns they
added, and the operator state in them (pauses, replica bounds, hints, bindings, cost history).
So the command first lists what it would reverse and drop, and goes ahead only when told to:
``--yes``, or a yes at the prompt of an interactive terminal. Without a terminal (CI, scripts)
and without ``--yes`` it refuses (exit 2) and the store is left as it was; ``--dry-run`` only
lists. The reversal itself is one transaction (``migrations/env.py``): all of it or nothing."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from controlplane.cli.demo_store import settings_with_db
from controlplane.cli.store_origin import ConfigOption, DbOption, db_url_named, refuse_in_memory
from controlplane.domain.wording import counted

if TYPE_CHECKING:  # imported where used: `headroom db --help` loads no store
    from controlplane.store.reversal import DowngradePlan, Dropped

_out = Console(soft_wrap=True, markup=False, highlight=False)
_err = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)


def _held(dropped: Dropped) -> str:
    if dropped.held is None:
        return "not counted"
    noun = "row" if dropped.column is None else "value"
    return counted(dropped.held, noun) if dropped.held else "no data"


def plan_lines(plan: DowngradePlan, url: str, revision: str) -> list[str]:
    """The listing: the migrations reversed, newest first, and under each what it drops."""
    if not plan.reversals:
        return [f"database {url}: nothing to downgrade to {revision} (store at "
                f"{plan.stamped or 'no revision'})"]
    lines = [f"database {url}: downgrading from {plan.stamped} to {plan.target or 'base'} "
             f"reverses {counted(len(plan.reversals), 'migration')}:"]
    for reversal in plan.reversals:
        lines.append(f"  {reversal.revision}  {reversal.summary}")
        for dropped in reversal.dropped:
            kind = "column" if dropped.column is not None else "table"
            lines.append(f"        drops {kind} {dropped.name}: {_held(dropped)}")
    return lines


def _interactive() -> bool:
    """Whether someone at a terminal can answer the prompt."""
    return sys.stdin.isatty()


def loss_summary(plan: DowngradePlan) -> str:
    """What the downgrade loses, in one phrase for the refusal's line."""
    losses = plan.losses
    if not losses:
        return "drops no data the store holds"
    return "drops data: " + ", ".join(f"{d.name} ({_held(d)})" for d in losses)


def db_downgrade(revision: Annotated[str, typer.Argument(
                     metavar="REVISION", help="target revision, e.g. base")],
                 config: ConfigOption = None, db: DbOption = None,
                 yes: Annotated[bool, typer.Option(
                     "--yes", "-y", help="go ahead without asking")] = False,
                 dry_run: Annotated[bool, typer.Option(
                     "--dry-run", help="list what would be reversed and dropped; change "
                                       "nothing")] = False) -> None:
    """Revert Alembic migrations down to REVISION.

    First lists the migrations it reverses and the tables and columns they drop, with the rows
    or values the store holds there. Then goes ahead with --yes, or asks on a terminal; with
    neither (a script, CI) refuses with exit code 2, the store unchanged."""
    from controlplane.settings import ConfigError
    from controlplane.store import MigrationError, downgrade
    from controlplane.store.configured import open_store
    from controlplane.store.engine import redact, sqlite_file, store_revision
    from controlplane.store.reversal import downgrade_plan

    settings = settings_with_db(config, db)
    url = settings.db.url
    refuse_in_memory(url)
    store_file = sqlite_file(url)
    if store_file is not None and not store_file.exists():  # opening it would create it
        raise ConfigError(f"db.url {redact(url)}: no store at {store_file}, so "
                          "nothing to downgrade; check the path")
    with db_url_named(settings):
        store = open_store(settings.db)
    plan = downgrade_plan(store.engine, revision)
    _out.print("\n".join(plan_lines(plan, redact(url), revision)))
    if dry_run:
        _err.print("dry run: nothing changed")
        return
    if plan.reversals and not yes:
        if not _interactive():
            raise MigrationError(
                f"database {redact(url)}: not downgraded to {revision}: it reverses "
                f"{counted(len(plan.reversals), 'migration')} and {loss_summary(plan)}; "
                "nothing changed. Rerun with --yes to go ahead (--dry-run only lists)")
        if not typer.confirm(f"Downgrade and {loss_summary(plan)}?", default=False):
            _err.print("not downgraded: nothing changed")
            raise typer.Exit(1)
    if plan.reversals and store_revision(store.engine) != plan.stamped:
        raise MigrationError(f"database {redact(url)}: not downgraded: the store moved from "
                             f"revision {plan.stamped} while the listing was made; rerun")
    downgrade(store.engine, revision if not plan.reversals else plan.target or "base",
              settings.db.migration_lock_wait_s)
    if not plan.reversals:  # already there (the listing said so): nothing was downgraded
        _err.print(f"database {redact(url)}: nothing changed")
        return
    reached = plan.target or "base"
    asked = f" ({revision})" if reached != revision else ""
    _err.print(f"database {redact(url)} downgraded to {reached}{asked}")  # the URL whole: copied
