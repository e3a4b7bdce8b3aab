"""Paused models in the store (the models table's ``paused_*`` columns, Alembic revision 0022):
set and cleared by ``headroom models pause`` / ``resume``, read by every reconcile tick
(``ModelPauses`` port), by ``headroom status`` and, with each model's replica bounds (the
``min_replicas`` / ``max_replicas`` columns: ``ReplicaBounds`` port), by KEDA's scaler at each
call."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Row, select, update
from sqlmodel import SQLModel

from controlplane.domain.pause import ModelPause, PauseSet
from controlplane.store.tables import ModelRecord
from controlplane.store.utc import as_utc

#: the ``paused_by`` column's width
PAUSED_BY_CHARS = 100


def _models() -> Any:
    return SQLModel.metadata.tables[str(ModelRecord.__tablename__)].c


def _pause(row: Row[Any]) -> ModelPause:
    return ModelPause(str(row.name), None if row.paused_replicas is None
                      else int(row.paused_replicas), as_utc(row.paused_at),
                      str(row.paused_by or ""))


def paused_models(connection: Connection) -> tuple[ModelPause, ...]:
    """Every paused model of the models table, by name."""
    m = _models()
    rows = connection.execute(select(m.name, m.paused_replicas, m.paused_at, m.paused_by)
                              .where(m.paused_at.is_not(None)).order_by(m.name)).all()
    return tuple(_pause(r) for r in rows)


class SqlModelPauses:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def pause(self, model: str, replicas: int | None, now: datetime, by: str) -> PauseSet | None:
        """Pause ``model`` (held at ``replicas``; None: at its observed ones) as of ``now`` by
        ``by``; None, nothing written, when the models table does not list it. A paused model
        keeps its pause (when and by whom): only a ``replicas`` given replaces its count."""
        m = _models()
        with self.engine.begin() as connection:
            started = connection.execute(update(m.name.table).where(
                m.name == model, m.paused_at.is_(None)).values(
                paused_replicas=replicas, paused_at=now, paused_by=by[:PAUSED_BY_CHARS]))
            if started.rowcount:
                return PauseSet(ModelPause(model, replicas, now, by[:PAUSED_BY_CHARS]))
            row = connection.execute(select(m.name, m.paused_replicas, m.paused_at, m.paused_by)
                                     .where(m.name == model)).first()
            if row is None:
                return None
            earlier = _pause(row)
            if replicas is None or replicas == earlier.replicas:
                return PauseSet(earlier, earlier)
            connection.execute(update(m.name.table).where(m.name == model).values(
                paused_replicas=replicas))
        return PauseSet(replace(earlier, replicas=replicas), earlier)

    def resume(self, model: str) -> ModelPause | None:
        """Clear ``model``'s pause; the pause it had (None: not paused, or not in the models
        table: the CLI checks the name first)."""
        m = _models()
        with self.engine.begin() as connection:
            row = connection.execute(select(m.name, m.paused_replicas, m.paused_at, m.paused_by)
                                     .where(m.name == model)).first()
            if row is None or row.paused_at is None:
                return None
            connection.execute(update(m.name.table).where(m.name == model).values(
                paused_replicas=None, paused_at=None, paused_by=None))
        return _pause(row)

    def paused_models(self) -> tuple[ModelPause, ...]:
        with self.engine.connect() as connection:
            return paused_models(connection)

    def replica_bounds(self, model: str) -> tuple[int | None, int | None]:
        if "\x00" in model:  # no model's name (PostgreSQL text cannot hold NUL): not asked
            return None, None
        m = _models()
        with self.engine.connect() as connection:
            row = connection.execute(select(m.min_replicas, m.max_replicas)
                                     .where(m.name == model)).first()
        if row is None:
            return None, None
        return (None if row.min_replicas is None else int(row.min_replicas),
                None if row.max_replicas is None else int(row.max_replicas))
