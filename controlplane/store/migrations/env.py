"""Alembic environment: runs against the engine handed over in ``config.attributes``, or for
`alembic` run by hand, one opened as Headroom opens its store (``engine_by_hand``)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, Engine
from sqlmodel import SQLModel

from controlplane.settings import ConfigError, load_settings
from controlplane.store import tables  # noqa: F401  (registers the tables on the metadata)
from controlplane.store.engine import make_engine
from controlplane.store.migration_lock import (
    DEFAULT_MIGRATION_LOCK_WAIT_S,
    bound_table_lock_waits,
    take_migration_lock,
)

config = context.config
target_metadata = SQLModel.metadata


def lock_for_migration(connection: Connection) -> None:
    """Open the migration's transaction holding the store's write lock, so two processes that
    migrate at once go one after the other (see ``migration_lock``). PostgreSQL: a
    transaction-scoped advisory lock, waited for ``db.migration_lock_wait_s`` at most; SQLite:
    BEGIN IMMEDIATE (the file's write lock, waited for its busy timeout; its DDL then commits or
    rolls back whole, as on PostgreSQL). On PostgreSQL each table lock the migration then waits
    for is bounded too (``bound_table_lock_waits``)."""
    if connection.dialect.name == "postgresql":
        take_migration_lock(connection, config.attributes.get(
            "migration_lock_wait_s", DEFAULT_MIGRATION_LOCK_WAIT_S))
        bound_table_lock_waits(connection)
    elif connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def suspend_foreign_keys(connection: Connection) -> None:
    """SQLite: enforce no foreign key while the migration runs (before its transaction: the
    pragma does nothing inside one). A batch migration rebuilds a table by copying it and
    dropping the old one, and with the keys on that drop deletes the rows it copied first, which
    fails when other tables refer to them (the downgrade of 0005 rebuilds ``ticks``, which every
    plan refers to). The copy keeps every row, so every reference still holds afterwards."""
    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")


def engine_by_hand() -> Engine:
    """The engine of `alembic` run by hand (an operator's own alembic.ini naming
    ``sqlalchemy.url``, or else db.url): opened as Headroom opens its store, bounded by the db
    settings of the environment (HEADROOM_DB__CONNECT_TIMEOUT_S, __RESPONSE_TIMEOUT_S,
    __MIGRATION_LOCK_WAIT_S) as `headroom db upgrade` is. A bad setting stops it, one line."""
    try:
        db = load_settings().db
    except ConfigError as error:
        raise SystemExit(f"error: {error}") from None
    config.attributes.setdefault("migration_lock_wait_s", db.migration_lock_wait_s)
    return make_engine(config.get_main_option("sqlalchemy.url") or db.url, db.connect_timeout_s,
                       response_timeout_s=db.response_timeout_s)


def run_migrations_online() -> None:
    handed: Engine | None = config.attributes.get("engine")
    engine = handed if handed is not None else engine_by_hand()
    try:
        migrate(engine)
    finally:
        if handed is None:
            engine.dispose()


def migrate(engine: Engine) -> None:
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            suspend_foreign_keys(connection)
        try:
            lock_for_migration(connection)
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=sqlite,
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            if sqlite:
                connection.rollback()  # PRAGMA foreign_keys is a no-op inside a transaction
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")


run_migrations_online()
