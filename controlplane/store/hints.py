"""Demand hints in the store (table ``demand_hints``, Alembic revision 0007): added and removed by
``headroom hint``, read by every reconcile tick (``DemandHints`` port)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Connection, Engine, Row
from sqlalchemy import select as sa_select
from sqlmodel import Field, Session, SQLModel

from controlplane.domain.hints import DemandHint
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


class SqlDemandHints:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add_hint(self, hint: DemandHint, now: datetime) -> DemandHint:
        """Store ``hint``; it comes back with its id."""
        row = DemandHintRecord(model=hint.model, rate_rps=hint.rate_rps, start_at=hint.start_at,
                               end_at=hint.end_at, reason=hint.reason, created_at=now)
        with Session(self.engine, expire_on_commit=False) as session:
            session.add(row)
            session.commit()
            session.refresh(row)
        return _hint(row)

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
