"""The type of every time column: written as the UTC instant on SQLite and PostgreSQL alike;
and ``as_utc`` for the values read back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Dialect
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """``DateTime(timezone=True)`` (the same DDL, so no migration) that converts an aware value
    to UTC before it is written or compared: SQLite keeps only the wall time, so 10:00+02:00
    would be stored, and read back, as 10:00 UTC. A naive value is taken as UTC, as the store
    reads its own naive SQLite values (``as_utc``), rather than in a PostgreSQL session's zone."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_literal_param(self, value: Any, dialect: Dialect) -> str:
        return str(self.process_bind_param(value, dialect))

    @property
    def python_type(self) -> type[datetime]:
        return datetime


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time in Headroom is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
