"""The guard memory a tick saves before it acts, and the newest guard memory a tick starts from.

A tick's report, saved after its actions, carries its guard memory: the changes it made (which
start cooldowns and spend disruption budget) and every recommendation (stabilization windows).
A process killed between acting and saving (OOM, node loss, SIGKILL) would leave the store's
newest memory one tick old, and the next tick, in this process or another, would allow a second
step at once: a crash loop could scale a pool down by ``max_step`` every restart. So an applying
tick first saves the memory it leaves if every change it planned is made (the cautious reading:
a change that then failed holds its cooldown until the next tick's record replaces it), in one
row replaced each tick; the newest memory is that row's when it is newer than the newest tick's
record, else the record's. A dry run saves no intent: it changes nothing.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import SQLModel

from controlplane.domain.fleet_status import UnrecordedTick
from controlplane.domain.guards import GuardMemory
from controlplane.store import codec
from controlplane.store.tables import GuardIntentRecord, TickRecord

log = logging.getLogger("headroom.reconcile")
SLOT = 1


def _newest_tick(connection: Connection) -> tuple[datetime, str] | None:
    ticks = SQLModel.metadata.tables[str(TickRecord.__tablename__)].c
    row = connection.execute(select(ticks.started_at, ticks.guard_memory_json)
                             .order_by(ticks.id.desc()).limit(1)).first()
    return None if row is None else (_utc(row[0]), row[1])


def _intent(connection: Connection) -> tuple[datetime, str, str | None] | None:
    intents = SQLModel.metadata.tables[str(GuardIntentRecord.__tablename__)].c
    row = connection.execute(select(intents.started_at, intents.memory_json, intents.writer)
                             .where(intents.slot == SLOT)).first()
    return None if row is None else (_utc(row[0]), row[1], row[2])


def _utc(at: datetime) -> datetime:
    """SQLite hands back naive datetimes (``repository.as_utc``)."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def unrecorded_tick(connection: Connection) -> UnrecordedTick | None:
    """The tick whose intent is newer than the newest tick record: one in progress, or one
    killed after it may have acted (``headroom status`` says so); None when there is none."""
    tick = _newest_tick(connection)
    intent = _intent(connection)
    if intent is None or (tick is not None and intent[0] <= tick[0]):
        return None
    return UnrecordedTick(intent[0], intent[2])


def newest_guard_memory(connection: Connection) -> GuardMemory:
    """The intent's memory when a tick saved it after the newest tick record started (that tick
    was killed before its record was saved), else the newest record's; empty when neither."""
    tick = _newest_tick(connection)
    intent = _intent(connection)
    if intent is not None and (tick is None or intent[0] > tick[0]):
        return codec.guard_memory_from_json(intent[1])
    return GuardMemory() if tick is None else codec.guard_memory_from_json(tick[1])


def save_intent(connection: Connection, started_at: datetime, memory: GuardMemory,
                writer: str | None) -> None:
    """Replace the intent with ``memory`` of the tick started at ``started_at``; logs
    ``tick.unrecorded`` when the intent it replaces belongs to a tick that left no record."""
    tick = _newest_tick(connection)
    intent = _intent(connection)
    if intent is not None and intent[0] < started_at and (tick is None or intent[0] > tick[0]):
        log.warning("tick.unrecorded", extra={
            "started_at": intent[0].isoformat(), "writer": intent[2] or "unknown",
            "kept": "the store has no record of it (killed before its save, or the save "
                    "failed); it may have acted: its guard memory, every planned change "
                    "counted as made, was the newest and this tick started from it"})
    values = {"slot": SLOT, "started_at": started_at,
              "memory_json": codec.guard_memory_to_json(memory), "writer": writer}
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    table = SQLModel.metadata.tables[str(GuardIntentRecord.__tablename__)]
    insert = dialect.insert(table).values(**values)
    connection.execute(insert.on_conflict_do_update(
        index_elements=["slot"], set_={k: v for k, v in values.items() if k != "slot"}))
