"""Demand hints in the store (table ``demand_hints``, Alembic revision 0007): added and removed by
``headroom hint``, read by every reconcile tick (``DemandHints`` port); withdrawn with their
model by ``headroom models remove`` (``remove_model_and_hints``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Connection, Engine, Row
from sqlalchemy import delete as sa_delete
from sqlalchemy import insert as sa_insert
from sqlalchemy import select as sa_select
from sqlmodel import Field, Session, SQLModel

from controlplane.domain.hints import DemandHint
from controlplane.store.tables import ModelRecord
from controlplane.store.utc import UtcDateTime, as_utc

log = logging.getLogger("headroom.store")

#: the largest id the ``demand_hints.id`` column (INTEGER) holds
MAX_HINT_ID = 2**31 - 1


class DemandHintRecord(SQLModel, table=True):
    __tablename__ = "demand_hints"
    # a removed hint's id is never handed out again (SQLite reuses the largest id without it;
    # migration 0019), so a retried remove cannot delete another operator's hint
    __table_args__ = {"sqlite_autoincrement": True}
    id: int | None = Field(default=None, primary_key=True)
    model: str = Field(max_length=200, index=True)
    rate_rps: float
    start_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False))
    end_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False,
                                              index=True))
    reason: str = Field(default="", max_length=500)
    created_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False))


def _hint(row: DemandHintRecord | Row[Any]) -> DemandHint:
    return DemandHint(row.model, row.rate_rps, as_utc(row.start_at), as_utc(row.end_at),
                      row.reason, row.id)


def _valid_hints(rows: list[Row[Any]]) -> tuple[DemandHint, ...]:
    """The rows that are hints. A row no hint add could have written (an end before its start,
    a negative rate: put there by hand) is skipped with a warning naming its id and fault, so
    one bad row does not fail every tick, the KEDA scaler and ``headroom status``."""
    found = []
    for row in rows:
        try:
            found.append(_hint(row))
        except ValueError as error:
            log.warning("hint.skipped", extra={"hint_id": row.id, "model": row.model,
                                               "error": f"{error}; delete the row (SQL) and "
                                                        "add the hint again"})
    return tuple(found)


def hints_ending_after(connection: Connection,
                       ending_after_at: datetime | None) -> tuple[DemandHint, ...]:
    """The stored hints by start, those ending after ``ending_after_at`` (None: all): for the
    store, ``headroom status`` (inside its read-only transaction) and ``headroom hint list``."""
    table = SQLModel.metadata.tables[str(DemandHintRecord.__tablename__)]
    query = sa_select(table)
    if ending_after_at is not None:
        query = query.where(table.c.end_at > ending_after_at)
    rows = connection.execute(query.order_by(table.c.start_at, table.c.id)).all()
    return _valid_hints(list(rows))


def _lock_hints(connection: Connection) -> None:
    """Begin ``connection``'s transaction holding the hints' write lock (SQLite: BEGIN
    IMMEDIATE; PostgreSQL: a SHARE ROW EXCLUSIVE lock on the table, which readers pass)."""
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif connection.dialect.name == "postgresql":
        connection.exec_driver_sql("LOCK TABLE demand_hints IN SHARE ROW EXCLUSIVE MODE")


@dataclass(frozen=True, slots=True)
class ModelRemoval:
    """What ``remove_model_and_hints`` did besides taking the model out of the models table."""

    model: str
    hints: tuple[DemandHint, ...]  # the model's hints not ended then, by start
    hints_withdrawn: bool  # False: kept (``keep_hints``), or there were none


def remove_model_and_hints(engine: Engine, name: str, now: datetime,
                           keep_hints: bool = False) -> ModelRemoval | None:
    """Take ``name`` out of the models table (its history, plans and costs stay) and, unless
    ``keep_hints``, withdraw its demand hints not ended by ``now`` (a hint left behind would
    floor the model again the moment it is imported again); its ended hints stay, as history
    (``db.retention_s`` prunes them). One transaction, holding the hints' write lock: the
    model and its hints go together or not at all. None when ``name`` was not listed."""
    hints = SQLModel.metadata.tables[str(DemandHintRecord.__tablename__)]
    models = SQLModel.metadata.tables[str(ModelRecord.__tablename__)]
    with engine.connect() as connection:
        _lock_hints(connection)
        if connection.execute(sa_delete(models).where(models.c.name == name)).rowcount == 0:
            connection.rollback()
            return None
        rows = connection.execute(
            sa_select(hints).where(hints.c.model == name, hints.c.end_at > now)
            .order_by(hints.c.start_at, hints.c.id)).all()
        found = _valid_hints(list(rows))
        if found and not keep_hints:
            connection.execute(sa_delete(hints).where(
                hints.c.id.in_([h.hint_id for h in found])))
        connection.commit()
    return ModelRemoval(name, found, bool(found) and not keep_hints)


class SqlDemandHints:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add_hint(self, hint: DemandHint, now: datetime, starts_now: bool = False) -> DemandHint:
        """Store ``hint``; it comes back with its id. A hint not ended by ``now`` with the same
        model, rate, window and reason comes back instead of a second copy (a retried add whose
        first reply was lost: removing the id it returns withdraws the hint); ``starts_now``
        (the caller gave no start, so ``hint.start_at`` is ``now``): one that has started by
        ``now`` is the same. The check and the insert hold the table's write lock (SQLite:
        BEGIN IMMEDIATE; PostgreSQL: a SHARE ROW EXCLUSIVE lock, which readers pass), so two
        identical adds at once store one hint."""
        table = SQLModel.metadata.tables[str(DemandHintRecord.__tablename__)]
        with self.engine.connect() as connection:
            _lock_hints(connection)
            same_start = (table.c.start_at <= now) if starts_now else (
                table.c.start_at == hint.start_at)
            existing = connection.execute(
                sa_select(table).where(table.c.model == hint.model,
                                       table.c.rate_rps == hint.rate_rps, same_start,
                                       table.c.end_at == hint.end_at,
                                       table.c.reason == hint.reason, table.c.end_at > now)
                .order_by(table.c.id).limit(1)).first()
            if existing is not None:
                connection.rollback()
                return _hint(existing)
            hint_id = connection.execute(sa_insert(table).values(
                model=hint.model, rate_rps=hint.rate_rps, start_at=hint.start_at,
                end_at=hint.end_at, reason=hint.reason, created_at=now
            ).returning(table.c.id)).scalar_one()
            connection.commit()
        return replace(hint, hint_id=hint_id)

    def hints(self, ending_after_at: datetime | None = None) -> tuple[DemandHint, ...]:
        """The stored hints by start, those ending after ``ending_after_at`` (None: all)."""
        with self.engine.connect() as connection:
            return hints_ending_after(connection, ending_after_at)

    def active_hints(self, now: datetime) -> tuple[DemandHint, ...]:
        """The hints that have not ended by ``now`` (the reconcile tick's read)."""
        return self.hints(now)

    def remove_hint(self, hint_id: int) -> DemandHint | None:
        """Delete one hint; the hint deleted, None when there was none with that id (also for
        an id the id column cannot hold, which PostgreSQL refuses as out of range)."""
        if not 0 < hint_id <= MAX_HINT_ID:
            return None
        with Session(self.engine, expire_on_commit=False) as session:
            row = session.get(DemandHintRecord, hint_id)
            if row is None:
                return None
            session.delete(row)
            session.commit()
        return _hint(row)
