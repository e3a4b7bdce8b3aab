"""Leases in the SQL store (Alembic revision 0004), the store's counterpart of the Kubernetes
backend's Lease: ``domain/lease.py`` decides, this adapter writes what it decided atomically.

Every write is one statement whose effect tells who won, on SQLite and PostgreSQL alike, with no
read-modify-write window: the first record is an ``INSERT ... ON CONFLICT DO NOTHING`` (a row
inserted: this process created it), every later one an ``UPDATE ... WHERE version = <the version
decided on>`` that also bumps the version (a row updated: nobody wrote in between); each returns
the row it wrote. The version is the ``resource_version`` of ``LeaseRecord``. Database errors
are ``TransientError``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, Table, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, SQLModel, col, select

from controlplane.domain.errors import TransientError, error_line
from controlplane.domain.lease import LeaseRecord
from controlplane.store.tables import LeaseRowRecord
from controlplane.store.utc import as_utc


def _table() -> Table:
    return SQLModel.metadata.tables[LeaseRowRecord.__tablename__]


def _record(row: LeaseRowRecord) -> LeaseRecord:
    return LeaseRecord(holder=row.holder, lease_duration_s=row.duration_s,
                       acquire_at=None if row.acquired_at is None else as_utc(row.acquired_at),
                       renew_at=None if row.renewed_at is None else as_utc(row.renewed_at),
                       transitions=row.transitions, resource_version=str(row.version))


def _values(record: LeaseRecord) -> dict[str, Any]:
    return {"holder": record.holder, "acquired_at": record.acquire_at,
            "renewed_at": record.renew_at, "duration_s": record.lease_duration_s,
            "transitions": record.transitions}


class SqlLeaseStore:
    """LeaseStore over the SQL store's engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def read_lease(self, name: str) -> LeaseRecord | None:
        try:
            with Session(self.engine) as session:
                row = session.exec(select(LeaseRowRecord)
                                   .where(col(LeaseRowRecord.name) == name)).first()
                return None if row is None else _record(row)
        except SQLAlchemyError as error:
            raise TransientError(f"lease {name!r}: cannot read it: {error_line(error)}"
                                 ) from None

    def create_lease(self, name: str, record: LeaseRecord) -> bool:
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        insert = dialect.insert(_table()).values(name=name, version=1, **_values(record))
        return self._wrote(name, "create", insert.on_conflict_do_nothing(index_elements=["name"])
                           .returning(_table().c.version))

    def replace_lease(self, name: str, record: LeaseRecord) -> bool:
        if not record.resource_version.isdigit():
            raise ValueError(f"lease {name!r}: replacing needs the version it was decided on, "
                             f"got {record.resource_version!r}")
        statement = (update(LeaseRowRecord)
                     .where(col(LeaseRowRecord.name) == name)
                     .where(col(LeaseRowRecord.version) == int(record.resource_version))
                     .values(version=col(LeaseRowRecord.version) + 1, **_values(record))
                     .returning(col(LeaseRowRecord.version)))
        return self._wrote(name, "write", statement)

    def _wrote(self, name: str, verb: str, statement: Any) -> bool:
        """Run one write in its own transaction; True when it wrote the row. The row it returns
        tells (PostgreSQL's driver gives no rowcount for ``ON CONFLICT DO NOTHING``)."""
        try:
            with self.engine.begin() as connection:
                return len(connection.execute(statement).all()) == 1
        except SQLAlchemyError as error:
            raise TransientError(f"lease {name!r}: cannot {verb} it: {error_line(error)}"
                                 ) from None
