"""Store errors that say where ``db.url`` came from.

A store that cannot be reached is named by its URL, but the URL may come from a command-line
option, the environment (``HEADROOM_DB__URL``), the config file or the default; an operator
fixing it needs to know which. Commands run their store work inside ``db_url_named``, or hand
it to ``with_existing_store`` (``headroom hint``, ``headroom placement bindings | release``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from controlplane.cli.demo_store import settings_with_db, with_demo_hint
from controlplane.cli.streams import usage_error
from controlplane.domain.errors import error_line
from forecaster.errors import InputError
from scheduler.domain.errors import Unavailable

if TYPE_CHECKING:  # imported where used: `headroom --help` loads no store
    from controlplane.settings import Settings
    from controlplane.store import Store
    from controlplane.store.revisions import Standing

T = TypeVar("T")

#: ``--config`` and ``--db`` of the commands that read or add to an existing store
ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="YAML settings file")]
DbOption = Annotated[Path | None, typer.Option(
    metavar="<path>", dir_okay=False,
    help="SQLite store file (e.g. the demo's .headroom/demo.db); beats HEADROOM_DB__URL and "
         "db.url of --config")]


def refuse_in_memory(url: str) -> None:
    """ConfigError for a migration command (``db upgrade``, ``db downgrade``) on an in-memory
    database, which would keep nothing."""
    from controlplane.settings import ConfigError
    from controlplane.store.engine import in_memory

    if in_memory(url):
        raise ConfigError(f"db.url {url}: an in-memory database ends with this command, so a "
                          "migration would keep nothing; use sqlite:///FILE or a server URL")


@contextmanager
def db_url_named(settings: Settings) -> Iterator[None]:
    """A StoreUnavailable raised inside names the origin of ``settings.db.url``; so does the
    store failing inside once open (a write on a full disk, a server gone: SQLAlchemy's
    operational and interface errors), as a StoreUnavailable (one line, exit 2), not a
    traceback. A missing table or column is left to the caller, whose line says how to
    upgrade the schema."""
    from sqlalchemy.exc import InterfaceError, OperationalError

    from controlplane.store import StoreUnavailable
    from controlplane.store.engine import failed_in_use, missing_schema

    try:
        yield
    except StoreUnavailable as error:
        raise error.amended(f" (db.url from {settings.db_url_from})") from None
    except (OperationalError, InterfaceError) as error:
        if missing_schema(error_line(error)):
            raise
        raise failed_in_use(settings.db.url, error).amended(
            f" (db.url from {settings.db_url_from})") from None


def store_error_line(url: str, error: BaseException, standing: Standing | None = None) -> str:
    """A database error of a command's store work in one line; most often the schema is older
    than this Headroom, unless the connection was lost (a server gone, a stalled network).
    ``standing``, when read, turns the question into the store's revision and the command."""
    from sqlalchemy.exc import DBAPIError

    from controlplane.store.engine import not_a_sqlite_store, redact

    line = error_line(error)
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return f"store {redact(url)}: {line}"
    if not_a_sqlite_store(url, line):
        # no upgrade mends it: `headroom db upgrade` refuses such a file as well
        return f"store {redact(url)}: {line} (not a Headroom store, or damaged)"
    if standing is not None and standing.stamped is not None and standing.behind:
        return (f"store {redact(url)}: {line}: the store is at revision {standing.stamped}, "
                f"{standing.verdict}")
    return f"store {redact(url)}: {line} (is the schema current? run `headroom db upgrade`)"


def _standing(store: Store) -> Standing | None:
    """Where the store stands against this Headroom's migrations; None when that is unreadable
    too (the connection lost)."""
    from sqlalchemy.exc import SQLAlchemyError

    from controlplane.store.revisions import store_standing

    try:
        return store_standing(store.engine)
    except SQLAlchemyError:
        return None



@contextmanager
def store_errors(url: str) -> Iterator[None]:
    """A command's refusals and store errors as one-line usage errors (exit 2)."""
    from sqlalchemy.exc import SQLAlchemyError

    from controlplane.settings import ConfigError
    from controlplane.store import MigrationError, StoreUnavailable

    try:
        yield
    except (ConfigError, InputError, StoreUnavailable, MigrationError, Unavailable) as error:
        raise usage_error(str(error)) from None
    except SQLAlchemyError as error:
        raise usage_error(store_error_line(url, error)) from None


def with_existing_store(config: Path | None, db: Path | None, work: Callable[[Store], T]) -> T:
    """``work`` on the store ``--db`` / ``--config`` / the environment name, which must exist
    with its schema (never created here); ``InputError`` raised by ``work`` and store errors
    are one-line usage errors."""
    from sqlalchemy.exc import SQLAlchemyError

    from controlplane.settings import ConfigError
    from controlplane.store import StoreUnavailable
    from controlplane.store.configured import open_existing_store

    try:
        settings = settings_with_db(config, db)
    except ConfigError as error:
        raise usage_error(str(error)) from None
    url = settings.db.url
    with store_errors(url):
        try:
            with db_url_named(settings):
                store = open_existing_store(settings.db)
        except StoreUnavailable as error:
            raise with_demo_hint(error, settings) from None
        try:
            return work(store)
        except SQLAlchemyError as error:  # a store behind this Headroom: name its revision
            raise usage_error(store_error_line(url, error, _standing(store))) from None
        finally:
            store.engine.dispose()
