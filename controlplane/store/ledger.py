"""The issued forecasts of the reconcile loop in the SQL store (Alembic revision 0003).

A record is keyed by (model, target_at): recording it again, or scoring it again, changes
nothing, so a tick that runs twice (or two processes that race) count each error once.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Table, func, update
from sqlalchemy import select as select_columns
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, delete

from controlplane.autoscaling.issued import IssuedForecast, accuracy
from controlplane.domain.forecast_accuracy import ForecastAccuracy
from controlplane.store.repository import as_utc
from controlplane.store.tables import IssuedForecastRecord

_COLUMNS = ("model", "target_at", "step_s", "p50_rps", "p90_rps", "sigma")


def _table() -> Table:
    return SQLModel.metadata.tables[IssuedForecastRecord.__tablename__]


class SqlForecastLedger:
    """ForecastLedger over the SQL store's engine (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._mark: tuple[Any, ...] = ()
        self._records: tuple[IssuedForecast, ...] = ()
        self._target_ats: list[datetime] = []

    def _insert(self) -> Any:
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(_table()).on_conflict_do_nothing(
            index_elements=["model", "target_at"])

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
        """Served from a copy of the table, read again whenever (rows, newest id, scored rows)
        changed: records are only inserted, scored once or pruned, so that mark sees every
        write of any process; a full window is ~4,000 records per model."""
        c = _table().c
        with Session(self.engine) as session:
            mark = tuple(session.execute(select_columns(
                func.count(), func.max(c.id), func.count(c.scored_at))).one())
            if mark != self._mark:
                rows = session.execute(select_columns(
                    c.model, c.target_at, c.step_s, c.p50_rps, c.p90_rps, c.sigma,
                    c.observed_rps, c.scored_at).order_by(c.target_at, c.model)).all()
                self._records = tuple(IssuedForecast(
                    model, as_utc(target_at), step_s, p50, p90, sigma, observed,
                    None if scored_at is None else as_utc(scored_at))
                    for model, target_at, step_s, p50, p90, sigma, observed, scored_at in rows)
                self._target_ats = [r.target_at for r in self._records]
                self._mark = mark
        return self._records[bisect.bisect_left(self._target_ats, since_at):]

    def prune_issued(self, before_at: datetime) -> int:
        with Session(self.engine) as session:
            result = session.exec(delete(IssuedForecastRecord)
                                  .where(col(IssuedForecastRecord.target_at) < before_at))
            session.commit()
            return int(result.rowcount)


def recent_accuracy(connection: Connection, since_at: datetime) -> tuple[ForecastAccuracy, ...]:
    """Each model's forecast accuracy over the steps scored with an observation from
    ``since_at`` on (read-only: what ``headroom status`` shows)."""
    c = _table().c
    rows = connection.execute(select_columns(
        c.model, c.target_at, c.step_s, c.p50_rps, c.p90_rps, c.sigma, c.observed_rps)
        .where(c.target_at >= since_at, c.observed_rps.is_not(None))).all()
    return accuracy((IssuedForecast(model, as_utc(at), step_s, p50, p90, sigma, observed)
                     for model, at, step_s, p50, p90, sigma, observed in rows), since_at)
