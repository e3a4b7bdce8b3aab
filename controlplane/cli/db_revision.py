"""``headroom db current`` and ``headroom db history``: where a store stands against this
Headroom's migrations, read without writing anything (a SQLite file is opened ``mode=ro``, never
created)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from controlplane.cli.demo_store import settings_with_db, with_demo_hint
from controlplane.cli.store_origin import DbOption, db_url_named, store_error_line
from controlplane.cli.streams import usage_error

if TYPE_CHECKING:  # imported where used: `headroom db --help` loads no store
    from sqlalchemy import Engine

T = TypeVar("T")

ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="YAML settings file")]

#: ``headroom db current``'s exit codes
CURRENT, BEHIND, ERROR_OR_NEWER = 0, 1, 2


def _on_store(config: Path | None, db: Path | None,
              read: Callable[[Engine], T]) -> tuple[str, T]:
    """``read`` on the configured store, opened read-only; settings and store errors are the
    one-line ``error:`` (exit 2) of the other db commands."""
    from sqlalchemy.exc import SQLAlchemyError

    from controlplane.settings import ConfigError
    from controlplane.store import StoreUnavailable
    from controlplane.store.configured import open_read_only
    from controlplane.store.engine import in_memory, redact

    try:
        settings = settings_with_db(config, db)
    except ConfigError as error:
        raise usage_error(str(error)) from None
    url = settings.db.url
    if in_memory(url):
        raise usage_error(f"db.url {url}: an in-memory database ends with this command, so it "
                          "has no revision to show")
    try:
        with db_url_named(settings):
            engine = open_read_only(settings.db)
    except StoreUnavailable as error:
        raise usage_error(str(with_demo_hint(error, settings))) from None
    try:
        return redact(url), read(engine)
    except SQLAlchemyError as error:
        raise usage_error(store_error_line(url, error)) from None
    finally:
        engine.dispose()


def db_current(config: ConfigOption = None, db: DbOption = None) -> None:
    """The store's revision and this Headroom's head: current, behind or newer.

    Reads only. Exit code 0 when the store is current; 1 when it is behind (`headroom db upgrade`
    applies the rest), a database never migrated included; 2 when the store was migrated by a
    newer Headroom (a revision this one does not know), or for bad settings or a store that
    cannot be read."""
    from controlplane.store.engine import scripts, store_revision
    from controlplane.store.revisions import standing_of

    shown, stamped = _on_store(config, db, store_revision)
    standing = standing_of(scripts(), stamped)
    typer.echo(f"store {shown}: revision {stamped or 'none (never migrated)'}")
    typer.echo(f"this Headroom: head {standing.head}")
    typer.echo(standing.verdict)
    if standing.behind is None:
        raise typer.Exit(ERROR_OR_NEWER)
    if standing.behind > 0:
        raise typer.Exit(BEHIND)


def db_history(config: ConfigOption = None, db: DbOption = None) -> None:
    """This Headroom's migrations, newest first; the store's revision marked `<- store`.

    Reads only. Exit code 0; 2 for bad settings or a store that cannot be read."""
    from controlplane.store.engine import scripts, store_revision
    from controlplane.store.revisions import history_lines

    shown, stamped = _on_store(config, db, store_revision)
    typer.echo(f"migrations of this Headroom, newest first (store {shown}):")
    for line in history_lines(scripts(), stamped):
        typer.echo(line)
