"""The issued forecasts of the reconcile loop in the SQL store (Alembic revision 0003).

A record is keyed by (model, target_at): recording it again, or scoring it again, changes
nothing, so a tick that runs twice (or two processes that race) count each error once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, delete, select

from controlplane.autoscaling.issued import IssuedForecast
from controlplane.store.repository import as_utc
from controlplane.store.tables import IssuedForecastRecord

_COLUMNS = ("model", "target_at", "step_s", "p50_rps", "p90_rps", "sigma")


def _from_record(row: IssuedForecastRecord) -> IssuedForecast:
    return IssuedForecast(row.model, as_utc(row.target_at), row.step_s, row.p50_rps, row.p90_rps,
                          row.sigma, row.observed_rps,
                          None if row.scored_at is None else as_utc(row.scored_at))


class SqlForecastLedger:
    """ForecastLedger over the SQL store's engine (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _insert(self) -> Any:
        table = SQLModel.metadata.tables["issued_forecasts"]
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(table).on_conflict_do_nothing(index_elements=["model", "target_at"])

    def record_issued(self, issued: Sequence[IssuedForecast]) -> None:
        if not issued:
            return
        rows = [{name: getattr(r, name) for name in _COLUMNS} for r in issued]
        with Session(self.engine) as session:
            session.exec(self._insert().values(rows))
            session.commit()

    def record_scored(self, scored: Sequence[IssuedForecast]) -> None:
        with Session(self.engine) as session:
            for r in scored:
                session.exec(update(IssuedForecastRecord)
                             .where(col(IssuedForecastRecord.model) == r.model)
                             .where(col(IssuedForecastRecord.target_at) == r.target_at)
                             .where(col(IssuedForecastRecord.scored_at).is_(None))
                             .values(observed_rps=r.observed_rps, scored_at=r.scored_at))
            session.commit()

    def issued_since(self, since_at: datetime) -> tuple[IssuedForecast, ...]:
        with Session(self.engine) as session:
            rows = session.exec(select(IssuedForecastRecord)
                                .where(col(IssuedForecastRecord.target_at) >= since_at)
                                .order_by(col(IssuedForecastRecord.target_at),
                                          col(IssuedForecastRecord.model))).all()
            return tuple(_from_record(r) for r in rows)

    def prune_issued(self, before_at: datetime) -> int:
        with Session(self.engine) as session:
            result = session.exec(delete(IssuedForecastRecord)
                                  .where(col(IssuedForecastRecord.target_at) < before_at))
            session.commit()
            return int(result.rowcount)
