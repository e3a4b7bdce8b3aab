"""``headroom status``: the fleet's state and the loop's health from the store, read-only.

Exit codes for probes: 0 healthy; 1 when there is no tick yet, the last one failed, the newest
plan leaves a model unplaced, an action has failed on every deciding tick for 5 minutes
(``domain.failing_actions``) or it is older than ``--max-tick-age-s`` (the output says which); 2
for bad input (settings, a store that cannot be reached, has no schema or was migrated by a
newer Headroom); a reader that closes stdout early (``headroom status | head -1``) changes none
of them. It never writes: a SQLite store is opened ``mode=ro`` (``read_only_engine``), a
PostgreSQL one in read-only transactions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from controlplane.adapters.clock import WallClock
from controlplane.cli.demo_store import settings_with_db, with_demo_hint
from controlplane.cli.json_errors import JsonOption, write_document
from controlplane.cli.numbers import float_option
from controlplane.cli.store_origin import db_url_named, store_error_line
from controlplane.cli.streams import PipeConsole, exit_when_stdout_closes, usage_error

#: the default --max-tick-age-s in reconcile intervals
STALE_AFTER_INTERVALS = 3


def status_command(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML settings file")]
    = None,
    db: Annotated[Path | None, typer.Option(
        metavar="<path>", dir_okay=False,
        help="SQLite store file to read (e.g. the demo's .headroom/demo.db); beats "
             "HEADROOM_DB__URL and db.url of --config")] = None,
    json_out: JsonOption = False,
    max_tick_age_s: Annotated[float | None, float_option(
        "--max-tick-age-s", min=0.0,
        help=escape("a last tick older than this is unhealthy (exit 1) [default: 3 x "
                    "reconcile.interval_s]"))] = None,
) -> None:
    """The fleet and the reconcile loop as the store records them (read-only; exit 1 if stale).

    Shows the last tick (its age from the wall clock, status and reason), the process that
    wrote it (the leading replica's Lease identity) and when leadership last changed, the fleet
    lease, the placement journal (bindings, plan revision, last change), per model the observed
    load, the newest forecast 20 minutes ahead and the replicas (ready, pending, the target the
    fleet reported and the one the tick wanted), the forecast accuracy over the last hour, per
    pool the nodes and the GPU price, the profiles corrected online, the last plan's actions,
    the changes guards held back, MIG re-layouts in flight and the demand hints not ended.
    Exit code 0 when healthy; 1 when there is no tick yet, the last tick failed, the newest
    plan leaves a model unplaced, an action has failed on every deciding tick for 5 minutes
    or the last tick is older than --max-tick-age-s (while a simulated fleet runs, its ticks on
    its own clock: its sim-fleet lease's renewal); 2 when the store cannot be read."""
    from sqlalchemy import inspect
    from sqlalchemy.exc import SQLAlchemyError

    from controlplane import cost_reader
    from controlplane.autoscaling.hints import status_floors
    from controlplane.cli.status_document import status_document
    from controlplane.cli.status_view import render
    from controlplane.domain.fleet_status import judge_health
    from controlplane.domain.price_history import unapplied_price_notes
    from controlplane.fleet_lease import FLEET_LEASE
    from controlplane.settings import ConfigError, pool_specs
    from controlplane.store import MigrationError, StoreUnavailable
    from controlplane.store.configured import open_read_only
    from controlplane.store.engine import NO_SCHEMA_ADVICE, check_known_revision, redact
    from controlplane.store.status_reader import read_fleet_status

    try:
        settings = settings_with_db(config, db)
        url = settings.db.url
        with db_url_named(settings):
            engine = open_read_only(settings.db)
    except StoreUnavailable as error:
        raise usage_error(str(with_demo_hint(error, settings))) from None
    except ConfigError as error:
        raise usage_error(str(error)) from None
    try:
        if not inspect(engine).has_table("ticks"):
            raise usage_error(str(with_demo_hint(StoreUnavailable(
                f"store {redact(url)} has no Headroom schema", NO_SCHEMA_ADVICE), settings)))
        check_known_revision(engine, url)
        wall_now = WallClock().now()
        status = status_floors(read_fleet_status(engine, redact(url), FLEET_LEASE, wall_now),
                               settings.autoscaling.hint_lead_s)
        notes = (unapplied_price_notes(pool_specs(settings), cost_reader.price_table(engine))
                 if config is not None and "pools" in settings.model_fields_set else ())
    except MigrationError as error:
        raise usage_error(str(error)) from None
    except SQLAlchemyError as error:
        raise usage_error(store_error_line(url, error)) from None
    finally:
        engine.dispose()
    limit_s = (max_tick_age_s if max_tick_age_s is not None
               else STALE_AFTER_INTERVALS * settings.reconcile.interval_s)
    for note in notes:
        typer.echo(note, err=True)
    health = judge_health(status, wall_now, limit_s)
    code = 0 if health.healthy else 1
    with exit_when_stdout_closes(code):
        if json_out:
            write_document(json.dumps(status_document(status, health), allow_nan=False))
        else:
            render(PipeConsole(), status, health)
    if code:
        raise typer.Exit(code)
