"""The issued forecasts of the reconcile loop in the SQL store (Alembic revision 0003).

A record is keyed by (model, target_at): recording it again, or scoring it again, changes
nothing, so a tick that runs twice (or two processes that race) count each error once.

The first write of a key wins, so a deposed leader's late write could beat the new leader's:
under ``headroom serve`` each write (record, score, prune) is fenced by the leader's term, as its
tick records are (``store/tick_fence.py``), and refused (``Fenced``, nothing written) once
another term claimed the store.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Table, func, update
from sqlalchemy import select as select_columns
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, delete

from controlplane.autoscaling.issued import IssuedForecast, accuracy
from controlplane.domain.forecast_accuracy import ForecastAccuracy
from controlplane.store import tick_fence
from controlplane.store.tables import IssuedForecastRecord
from controlplane.store.utc import as_utc

_COLUMNS = ("model", "target_at", "step_s", "p50_rps", "p90_rps", "sigma")
_ROW_COLUMNS = (*_COLUMNS, "observed_rps", "scored_at")


def _table() -> Table:
    return SQLModel.metadata.tables[IssuedForecastRecord.__tablename__]


def _record(row: Any) -> IssuedForecast:
    """The record of a row (id first, then ``_ROW_COLUMNS``)."""
    _, model, target_at, step_s, p50, p90, sigma, observed, scored_at = row
    return IssuedForecast(model, as_utc(target_at), step_s, p50, p90, sigma, observed,
                          None if scored_at is None else as_utc(scored_at))


def _row_columns() -> list[Any]:
    c = _table().c
    return [c.id, *(c[name] for name in _ROW_COLUMNS)]


def _key(record: IssuedForecast) -> tuple[datetime, str]:
    return record.target_at, record.model


class SqlForecastLedger:
    """ForecastLedger over the SQL store's engine (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine, fence: Callable[[], int | None] | None = None) -> None:
        """``fence``: the fencing token of the leadership term this process holds (the tick
        records', ``RetryingDecisionStore.fence_token``); each write is refused (``Fenced``)
        once another term claimed a newer one. None, or a token of None: unfenced (reads
        only, the demo's take-over, tests)."""
        self.engine = engine
        self.fence = fence
        self._mark: tuple[Any, ...] = ()
        self._records: list[IssuedForecast] = []  # by (target_at, model), as _keys
        self._keys: list[tuple[datetime, str]] = []
        self._newest_id = 0
        self._lock = threading.Lock()

    def _insert(self) -> Any:
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(_table()).on_conflict_do_nothing(
            index_elements=["model", "target_at"])

    def record_issued(self, issued: Sequence[IssuedForecast]) -> None:
        if not issued:
            return
        rows = [{name: getattr(r, name) for name in _COLUMNS} for r in issued]
        with Session(self.engine) as session:
            self._check(session)
            session.exec(self._insert().values(rows))
            session.commit()

    def record_scored(self, scored: Sequence[IssuedForecast]) -> None:
        if not scored:
            return
        with Session(self.engine) as session:
            self._check(session)
            for r in scored:
                session.exec(update(IssuedForecastRecord)
                             .where(col(IssuedForecastRecord.model) == r.model)
                             .where(col(IssuedForecastRecord.target_at) == r.target_at)
                             .where(col(IssuedForecastRecord.scored_at).is_(None))
                             .values(observed_rps=r.observed_rps, scored_at=r.scored_at))
            session.commit()

    def _check(self, session: Session) -> None:
        """Raise ``Fenced`` unless this term's token is the newest, in ``session``'s
        transaction (which the write then commits)."""
        token = None if self.fence is None else self.fence()  # may claim it: before connecting
        tick_fence.check(session.connection(), token)

    def issued_since(self, since_at: datetime) -> tuple[IssuedForecast, ...]:
        """Served from a copy of the table, brought up to date whenever its mark (rows, newest
        id, scored rows, oldest target) changed: records are only inserted, scored once or
        pruned (the oldest first), so the copy reads the rows inserted since (id past its
        newest), those scored since (from its oldest unscored record on) and drops the pruned
        ones; a copy that then disagrees with the mark (a row committed out of id order on
        PostgreSQL) is read again whole. A full window is ~4,000 records per model: reading
        it on every tick made the tick of a large fleet outlast its interval."""
        c = _table().c
        with self._lock, Session(self.engine) as session:  # the copy changes in place
            mark = tuple(session.execute(select_columns(
                func.count(), func.max(c.id), func.count(c.scored_at),
                func.min(c.target_at))).one())
            if mark != self._mark:
                if not (self._mark and self._caught_up(session, mark)):
                    self._read_all(session)
                self._mark = mark
            return tuple(self._records[bisect.bisect_left(self._keys, (since_at, "")):])

    def _read_all(self, session: Session) -> None:
        rows = session.execute(select_columns(*_row_columns())).all()
        self._records = sorted((_record(row) for row in rows), key=_key)
        self._keys = [_key(r) for r in self._records]
        self._newest_id = max((row[0] for row in rows), default=0)

    def _caught_up(self, session: Session, mark: tuple[Any, ...]) -> bool:
        """Apply the rows pruned, scored and inserted since the last read; whether the copy
        then matches ``mark`` (rows, newest id, scored rows, oldest target)."""
        count, newest_id, scored_n, oldest_at = mark
        c = _table().c
        if oldest_at is not None:  # a prune drops the oldest targets
            del self._records[:bisect.bisect_left(self._keys, (as_utc(oldest_at), ""))]
            del self._keys[:len(self._keys) - len(self._records)]
        unscored = [r.target_at for r in self._records if r.scored_at is None]
        changed = list(session.execute(select_columns(*_row_columns()).where(
            c.id > self._newest_id)).all())
        if unscored:
            changed += session.execute(select_columns(*_row_columns()).where(
                c.target_at >= min(unscored), c.scored_at.is_not(None),
                c.id <= self._newest_id)).all()
        for row in changed:
            record = _record(row)
            at = bisect.bisect_left(self._keys, _key(record))
            if at < len(self._keys) and self._keys[at] == _key(record):
                self._records[at] = record
            else:
                self._records.insert(at, record)
                self._keys.insert(at, _key(record))
            self._newest_id = max(self._newest_id, row[0])
        return (len(self._records), self._newest_id or None,
                sum(r.scored_at is not None for r in self._records)) == (
            count, newest_id, scored_n)

    def prune_issued(self, before_at: datetime) -> int:
        with Session(self.engine) as session:
            self._check(session)
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
