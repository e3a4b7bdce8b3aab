"""The store as the ``db`` settings group says to open it.

A store's waits are bounded by three settings that go together: ``db.connect_timeout_s`` (the
first connection), ``db.response_timeout_s`` (a server that stops answering) and
``db.migration_lock_wait_s`` (another migrator's lock). Commands hand over the group whole
(``settings.db``) and these factories say the bounds once, so none is forgotten at a call site.
(The dashboard opens its engine itself: its pages bound a read more tightly.)"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import Engine, inspect, select
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import col

from controlplane.store.engine import in_memory, read_only_engine, sqlite_file, unopenable
from controlplane.store.repository import Store
from controlplane.store.tables import ModelRecord


class DbGroup(Protocol):
    """What the store is opened with: ``DbSettings`` is one."""

    @property
    def url(self) -> str: ...

    @property
    def connect_timeout_s(self) -> float: ...

    @property
    def response_timeout_s(self) -> float: ...

    @property
    def migration_lock_wait_s(self) -> float: ...


def open_store(db: DbGroup, migrate: bool = False) -> Store:
    """``Store.open`` of ``db.url`` with the group's bounds; ``migrate``: up to head first."""
    return Store.open(db.url, db.connect_timeout_s, migrate=migrate,
                      response_timeout_s=db.response_timeout_s,
                      migration_lock_wait_s=db.migration_lock_wait_s)


def open_existing_store(db: DbGroup, url: str | None = None) -> Store:
    """``Store.open_existing`` of ``url`` (default ``db.url``) with the group's bounds."""
    return Store.open_existing(url or db.url, db.connect_timeout_s,
                               response_timeout_s=db.response_timeout_s)


def open_read_only(db: DbGroup) -> Engine:
    """``read_only_engine`` of ``db.url`` with the group's bounds."""
    return read_only_engine(db.url, db.connect_timeout_s, db.response_timeout_s)


def listed_model_count(db: DbGroup) -> int:
    """``Store.listed_model_count`` of ``db.url`` with the group's bounds."""
    return Store.listed_model_count(db.url, db.connect_timeout_s, db.response_timeout_s)


def listed_model_names(db: DbGroup) -> list[str]:
    """The names the store at ``db.url`` lists in its models table (sorted), read without
    writing anything (``read_only_engine``): none for a SQLite file that does not exist yet, an
    in-memory database or a database without Headroom's models table. For the checks a start
    makes before it writes (``headroom demo``, ``serve --backend sim``)."""
    store_file = sqlite_file(db.url)
    if in_memory(db.url) or (store_file is not None and not store_file.is_file()):
        return []
    engine = read_only_engine(db.url, db.connect_timeout_s, db.response_timeout_s)
    try:
        if not inspect(engine).has_table(ModelRecord.__tablename__):
            return []
        with engine.connect() as connection:
            return sorted(connection.execute(select(col(ModelRecord.name))).scalars())
    except SQLAlchemyError as error:  # e.g. a file that is no database: as opening it says
        raise unopenable(db.url, error) from None
    finally:
        engine.dispose()
