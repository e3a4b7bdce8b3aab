"""The type of every time column: written as the UTC instant on SQLite and PostgreSQL alike;
and ``as_utc`` for the values read back."""

from __future__ import annotations

from datetime import UTC, datetime

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

    # no process_literal_param: SQLAlchemy then renders a literal (literal_binds) from
    # process_bind_param's UTC datetime with the DateTime type's own literal processor

    @property
    def python_type(self) -> type[datetime]:
        return datetime


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time in Headroom is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
