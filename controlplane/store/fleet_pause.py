"""The fleet's pause in the store (table ``fleet_pause``, Alembic revision 0029: one row while
paused): set and cleared by ``headroom fleet pause`` / ``resume``, read by every reconcile tick
(``FleetPauses`` port), by ``headroom status`` and by the dashboard."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, SQLModel

from controlplane.domain.fleet_pause import WHY_CHARS, FleetPause, FleetPauseSet
from controlplane.store.pauses import PAUSED_BY_CHARS
from controlplane.store.utc import UtcDateTime, as_utc

ROW_ID = 1  # the one row a paused fleet has


class FleetPauseRecord(SQLModel, table=True):
    __tablename__ = "fleet_pause"
    id: int = Field(default=ROW_ID, primary_key=True)
    paused_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False))
    paused_by: str = Field(default="", max_length=PAUSED_BY_CHARS)
    why: str = Field(default="", max_length=WHY_CHARS)


def _table() -> Any:
    return SQLModel.metadata.tables[str(FleetPauseRecord.__tablename__)]


def fleet_pause(connection: Connection) -> FleetPause | None:
    """The fleet's pause, None when it is not paused."""
    t = _table()
    row = connection.execute(select(t.c.paused_at, t.c.paused_by, t.c.why)
                             .where(t.c.id == ROW_ID)).first()
    return None if row is None else FleetPause(as_utc(row.paused_at), str(row.paused_by),
                                               str(row.why))


class SqlFleetPause:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def pause(self, now: datetime, by: str, why: str | None) -> FleetPauseSet:
        """Pause the fleet as of ``now`` by ``by`` with ``why`` (None: keep a paused fleet's);
        a paused fleet keeps when and by whom it was paused. Two operators pausing at once:
        the first one's row stands, the second finds it."""
        t = _table()
        pause = FleetPause(now, by[:PAUSED_BY_CHARS], (why or "")[:WHY_CHARS])
        try:
            with self.engine.begin() as connection:
                earlier = fleet_pause(connection)
                if earlier is None:
                    connection.execute(insert(t).values(id=ROW_ID, paused_at=pause.paused_at,
                                                        paused_by=pause.paused_by,
                                                        why=pause.why))
                    return FleetPauseSet(pause)
        except IntegrityError:  # paused meanwhile by another: its pause stands
            pass
        with self.engine.begin() as connection:
            earlier = fleet_pause(connection)
            assert earlier is not None  # a pause is only ever removed by a resume
            if why is None or pause.why == earlier.why:
                return FleetPauseSet(earlier, earlier)
            connection.execute(update(t).where(t.c.id == ROW_ID).values(why=pause.why))
        return FleetPauseSet(FleetPause(earlier.paused_at, earlier.paused_by, pause.why), earlier)

    def resume(self) -> FleetPause | None:
        """Clear the fleet's pause; the pause it had (None: it was not paused)."""
        with self.engine.begin() as connection:
            was = fleet_pause(connection)
            if was is not None:
                connection.execute(delete(_table()).where(_table().c.id == ROW_ID))
        return was

    def fleet_pause(self) -> FleetPause | None:
        with self.engine.connect() as connection:
            return fleet_pause(connection)
