"""Database engines: SQLite (WAL) by default, PostgreSQL by URL; Alembic migrations in code."""

from __future__ import annotations

import math
import re
import sqlite3
import time
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import quote

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import URL, Engine, create_engine, event, make_url, text
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from controlplane.domain.errors import error_line
from controlplane.domain.url_secrets import redact as redact  # re-exported: every store message
from controlplane.store.migration_lock import DEFAULT_MIGRATION_LOCK_WAIT_S, MigrationLockHeld
from controlplane.store.pg_response import (
    DEFAULT_RESPONSE_TIMEOUT_S,
    bounded_connect,
    keepalive_args,
)

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


#: what SQLite and PostgreSQL say of a table or column an older schema lacks
MISSING_SCHEMA = re.compile(r"no such (table|column)|(relation|column) \S+ does not exist")


def missing_schema(line: str) -> bool:
    """Whether a store error's ``line`` says a table or column is missing: the schema is older
    than this Headroom (or was never created), which `headroom db upgrade` mends."""
    return MISSING_SCHEMA.search(line) is not None


class StoreUnavailable(Exception):
    """The database URL cannot be reached or opened, or the store failed a read or write once
    open (``failed_in_use``: a full disk); the message names the URL. ``advice``,
    when there is some (the command that mends it), ends the message: a caller adding to the
    message (where db.url came from) adds to ``detail``, before it."""

    def __init__(self, detail: str, advice: str | None = None) -> None:
        super().__init__(f"{detail}; {advice}" if advice else detail)
        self.detail, self.advice = detail, advice

    def amended(self, addition: str) -> StoreUnavailable:
        """The same error with ``addition`` after its detail, its advice still last."""
        return StoreUnavailable(f"{self.detail}{addition}", self.advice)


#: what mends a store without Headroom's schema, as the error of a store behind on its
#: migrations says: `headroom db upgrade` (a command adds `headroom demo` where the demo would
#: make the store: ``controlplane.cli.demo_store.with_demo_hint``)
NO_SCHEMA_ADVICE = "run `headroom db upgrade`"
NO_FILE_ADVICE = "run `headroom db upgrade` to create it"


def no_store_file(url: str) -> StoreUnavailable:
    """A SQLite store file that does not exist: nothing to read yet (a directory at its path is
    named as one: no upgrade creates a file there)."""
    store_file = sqlite_file(url)
    if store_file is not None and store_file.is_dir():
        return StoreUnavailable(f"store {redact(url)}: {store_file} is a directory, not a "
                                "database file (give the file's path, e.g. sqlite:///DIR/"
                                "headroom.db)")
    return StoreUnavailable(f"store {redact(url)}: no such database file", NO_FILE_ADVICE)


class MigrationError(Exception):
    """A migration target Alembic cannot reach (unknown revision, a store migrated by a newer
    Headroom, a downgrade target above the current one); the message names URL and revision."""


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite store URL (absolute); None for a server database, an in-memory or
    URI-style one, or a string that is not a URL (``make_engine`` names that)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if (parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:")
            or "uri" in parsed.query):
        return None
    return Path(parsed.database).expanduser().resolve()


def not_a_sqlite_store(url: str, line: str) -> bool:
    """Whether the error ``line`` says the SQLite file of ``url`` is no database (or a damaged
    one), which no schema upgrade mends."""
    return url.startswith("sqlite") and ("not a database" in line or "malformed" in line)


def in_memory(url: str) -> bool:
    """A SQLite URL whose database lives only as long as the process (``sqlite://``)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return False
    return parsed.get_backend_name() == "sqlite" and (
        parsed.database in (None, "", ":memory:") or parsed.query.get("mode") == "memory")


#: the URL each engine ``make_engine`` / ``read_only_engine`` opened was given as
_GIVEN_URLS: weakref.WeakKeyDictionary[Engine, str] = weakref.WeakKeyDictionary()


def _normalize(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


WAL_SWITCH_RETRY_S = 10.0
WAL_SWITCH_PAUSE_S = 0.05


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    _switch_to_wal(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode=WAL``, retried for up to ``WAL_SWITCH_RETRY_S`` while the file is
    locked. Switching a new file takes its exclusive lock, and when two processes open a new
    store at once (the two replicas of deploy/, or ``serve`` beside ``demo``) each can hold the
    shared lock the other waits on; SQLite breaks that deadlock by failing one of them at once,
    without the busy timeout (1 in ~6 such opens failed with "database is locked" before this
    retry). An attempt that does wait is bounded by the connection's timeout, so a file another
    process keeps locked still fails after about that timeout plus the retry window."""
    deadline_at = time.monotonic() + WAL_SWITCH_RETRY_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline_at:
                raise
            time.sleep(WAL_SWITCH_PAUSE_S)


def make_engine(url: str, connect_timeout_s: float = 5.0, lock_timeout_s: float | None = None,
                statement_timeout_s: float | None = None,
                response_timeout_s: float = DEFAULT_RESPONSE_TIMEOUT_S,
                response_setting: str = "db.response_timeout_s") -> Engine:
    """Create an engine and prove the database answers; raise StoreUnavailable otherwise.

    Errors name the URL as given (``postgresql://...``), not the driver form it is opened with.
    ``lock_timeout_s``: a PostgreSQL statement waiting longer for a lock another session holds
    fails (lock_timeout) instead of waiting for ever, as SQLite's busy timeout already does; for
    readers such as the dashboard. None: wait. ``statement_timeout_s``: likewise a PostgreSQL
    statement running longer fails (statement_timeout), e.g. a slow server; SQLite ignores both.
    ``response_timeout_s``: a PostgreSQL server that answers nothing for this long (a stalled
    network, see ``pg_response``) fails the wait client-side, with an error naming the server
    and ``response_setting``; SQLite ignores it.
    """
    given, url = url, _normalize(url)
    try:
        if url.startswith("sqlite"):
            store_file = sqlite_file(url)  # the file every other check names (``~`` expanded)
            if store_file is not None:
                store_file.parent.mkdir(parents=True, exist_ok=True)
            opened = url if store_file is None else make_url(url).set(database=str(store_file))
            engine = create_engine(opened, connect_args={"check_same_thread": False,
                                                         "timeout": connect_timeout_s})
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            # libpq waits whole seconds, at least 2 (settings refuse other values for
            # db.connect_timeout_s): rounded up, never shorter than asked
            connect_args: dict[str, Any] = {"connect_timeout": max(2, math.ceil(connect_timeout_s))}
            timeouts = [f"-c {name}={max(1, int(seconds * 1000))}" for name, seconds in
                        (("lock_timeout", lock_timeout_s),
                         ("statement_timeout", statement_timeout_s)) if seconds is not None]
            if timeouts:  # added to the URL's own options, not in place of them
                own = make_url(url).query.get("options", "")
                connect_args["options"] = " ".join(filter(None, [
                    *([own] if isinstance(own, str) else own), *timeouts]))
            own_query = make_url(url).query  # TCP settings of the URL's own win
            connect_args |= {name: value for name, value in
                             keepalive_args(response_timeout_s).items() if name not in own_query}
            engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
            event.listen(engine, "do_connect",
                         bounded_connect(response_timeout_s, response_setting))
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except ImportError as error:  # a URL whose driver is not installed (mysql://, ...)
        raise StoreUnavailable(f"cannot open database {redact(given)}: no driver for it is "
                               f"installed ({error}); Headroom stores are sqlite:///FILE or "
                               "postgresql+psycopg://user@host:5432/db") from None
    except (SQLAlchemyError, OSError, ValueError) as error:
        raise unopenable(given, error) from None
    _GIVEN_URLS[engine] = given
    return engine


def unopenable(url: str, error: BaseException) -> StoreUnavailable:
    """The one-line error of a store at ``url`` that could not be opened or read: a SQLite file
    that is no database (or a damaged one) says so and what to do, else it could not be
    reached."""
    line = error_line(error)
    if isinstance(error, ArgumentError) and "parse" in line:  # no URL: nothing was reached
        return StoreUnavailable(f"cannot open database {redact(url)}: not a database URL "
                                f"({line}); Headroom stores are sqlite:///FILE or "
                                "postgresql+psycopg://user@host:5432/db")
    if not_a_sqlite_store(url, line):
        return StoreUnavailable(f"cannot open database {redact(url)}: {line} (not a Headroom "
                                "store, or damaged: move the file aside, and `headroom db "
                                "upgrade`, `demo` or `serve` makes a new store in its place)")
    return StoreUnavailable(f"cannot reach database {redact(url)}: {line}")


def failed_in_use(url: str, error: BaseException) -> StoreUnavailable:
    """The one-line error of the store at ``url`` failing a read or write once open (a disk
    full, a connection lost mid-run): a command stops on it as on a store it could not open,
    in the database's own words, instead of a driver's traceback."""
    return StoreUnavailable(f"store {redact(url)}: {error_line(error)}")


def read_only_engine(url: str, connect_timeout_s: float = 5.0,
                     response_timeout_s: float = DEFAULT_RESPONSE_TIMEOUT_S) -> Engine:
    """An engine for checks that must leave no trace: a SQLite file is opened ``mode=ro`` (never
    created, its directory neither, its journal mode kept; StoreUnavailable when it does not
    exist; SQLite may leave the -wal/-shm files of a WAL store, which its next writer reuses); a
    server or in-memory database as ``make_engine`` opens it, which writes nothing by itself."""
    store_file = sqlite_file(url)
    if store_file is None:
        return make_engine(url, connect_timeout_s, response_timeout_s=response_timeout_s)
    if not store_file.is_file():
        raise no_store_file(url)
    try:
        # a URL object: the path is not parsed again, so SQLite's URI decodes what quote() did
        opened = URL.create("sqlite", database=f"file:{quote(str(store_file))}",
                            query={"mode": "ro", "uri": "true"})
        engine = create_engine(opened, connect_args={"check_same_thread": False,
                                                     "timeout": connect_timeout_s})
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError, ValueError) as error:
        raise StoreUnavailable(f"cannot read database {redact(url)}: {error_line(error)}"
                               ) from None
    _GIVEN_URLS[engine] = url
    return engine


def _scripts_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def alembic_config(engine: Engine,
                   lock_wait_s: float = DEFAULT_MIGRATION_LOCK_WAIT_S) -> Config:
    """Alembic's config running migrations on ``engine`` (``migrations/env.py``), waiting
    ``lock_wait_s`` at most for the PostgreSQL migration lock."""
    config = _scripts_config()
    # configparser interpolates '%': a '%' of the URL (a password, an escaped path) is doubled
    config.set_main_option("sqlalchemy.url",
                           engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    config.attributes["engine"] = engine
    config.attributes["migration_lock_wait_s"] = lock_wait_s
    return config


def upgrade(engine: Engine, revision: str = "head",
            lock_wait_s: float = DEFAULT_MIGRATION_LOCK_WAIT_S) -> None:
    """Migrate up to ``revision``; MigrationError when the store is past it already (Alembic
    leaves such a store as it is, which is not at ``revision``), or when another migration
    holds a PostgreSQL store's migration lock for ``lock_wait_s`` (db.migration_lock_wait_s;
    nothing applied)."""
    config = alembic_config(engine, lock_wait_s)
    try:
        command.upgrade(config, revision)
        wanted = ScriptDirectory.from_config(config).get_revision(revision)
        reached = store_revision(engine)
    except (CommandError, SQLAlchemyError, MigrationLockHeld) as error:
        raise _migration_error(engine, "upgrade", revision, error) from None
    if reached != (wanted.revision if wanted is not None else None):  # None: base
        raise MigrationError(f"database {shown_url(engine)}: cannot upgrade to {revision!r}: it is "
                             f"at revision {reached!r}, past it; `headroom db downgrade "
                             f"{revision}` goes back")


def store_revision(engine: Engine) -> str | None:
    """The revision the store is stamped with; None for a database never migrated."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def scripts() -> ScriptDirectory:
    """The migrations this Headroom has."""
    return ScriptDirectory.from_config(_scripts_config())


def knows(known: ScriptDirectory, revision: str) -> bool:
    """Whether ``revision`` is one of ``known``'s migrations (else a newer Headroom made it)."""
    return revision in {script.revision for script in known.walk_revisions()}


def check_known_revision(engine: Engine, url: str) -> None:
    """MigrationError naming ``url`` when its store is stamped with a revision this Headroom has
    no migration for: a newer Headroom migrated it, and what this one reads or writes there
    could mean something else by then. Reads only (``url``: the URL to name it by)."""
    stamped, known = store_revision(engine), scripts()
    if stamped is None or knows(known, stamped):
        return
    raise MigrationError(f"store {redact(url)} is at revision {stamped!r}, which this Headroom "
                         "does not know: a newer Headroom migrated it; run that version, or "
                         f"its `headroom db downgrade {known.get_current_head()}` first")


def downgrade(engine: Engine, revision: str = "base",
              lock_wait_s: float = DEFAULT_MIGRATION_LOCK_WAIT_S) -> None:
    """Revert down to ``revision``; MigrationError as for ``upgrade``."""
    try:
        command.downgrade(alembic_config(engine, lock_wait_s), revision)
    except (CommandError, SQLAlchemyError, MigrationLockHeld) as error:
        raise _migration_error(engine, "downgrade", revision, error) from None


def _migration_error(engine: Engine, verb: str, revision: str,
                     error: CommandError | SQLAlchemyError | MigrationLockHeld) -> MigrationError:
    """One line: an Alembic refusal, or the database's own error (e.g. a table that already
    exists in a store made without migrations: no alembic_version stamp)."""
    line = error_line(error)
    if isinstance(error, DBAPIError) and _sqlstate(error) == LOCK_NOT_AVAILABLE:
        line = _table_lock_held(error)
    if isinstance(error, CommandError) and line.startswith("Can't locate revision"):
        try:
            stamped = store_revision(engine)
        except SQLAlchemyError:
            stamped = None
        if stamped is not None and f"'{stamped}'" in line:
            head = scripts().get_current_head()
            line += (" (the store's own revision: a newer Headroom migrated it; run that "
                     f"version, or its `headroom db downgrade {head}` first)")
    return MigrationError(f"database {shown_url(engine)}: cannot {verb} to {revision!r}: {line}")


#: PostgreSQL's SQLSTATE of a lock not granted within lock_timeout (lock_not_available)
LOCK_NOT_AVAILABLE = "55P03"

#: the table a migration statement works on: ALTER/DROP TABLE t, CREATE INDEX ... ON t, ...
_STATEMENT_TABLE = re.compile(
    r"\b(?:TABLE(?:\s+IF\s+(?:NOT\s+)?EXISTS)?|ON|UPDATE|INTO|FROM)\s+(?:ONLY\s+)?"
    r'"?([A-Za-z_][\w.]*)"?', re.IGNORECASE)


def _sqlstate(error: DBAPIError) -> str | None:
    sqlstate = getattr(error.orig, "sqlstate", None)
    return sqlstate if isinstance(sqlstate, str) else None


def _table_lock_held(error: DBAPIError) -> str:
    """A migration statement that waited past its lock_timeout for a table lock (see
    ``migration_lock.bound_table_lock_waits``), naming the table when the error or the
    statement does; the migration's transaction rolled back, so nothing of it applied."""
    diag = getattr(error.orig, "diag", None)
    table = getattr(diag, "table_name", None)
    if not table and error.statement:
        found = _STATEMENT_TABLE.search(error.statement)
        table = found.group(1) if found else None
    on = f" on table {table!r}" if table else ""
    return (f"a table lock{on} is held by another session (e.g. a backup or an open "
            "transaction): retry when it ends; nothing was applied")


def shown_url(engine: Engine) -> str:
    """The store's URL as the operator gave it (``postgresql://``, not the driver's form
    ``make_engine`` opens), as every other store message names it; redacted."""
    given = _GIVEN_URLS.get(engine)
    return redact(given if given is not None else engine.url.render_as_string(
        hide_password=False))
