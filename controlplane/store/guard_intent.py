"""The guard memory a tick saves before it acts, and the newest guard memory a tick starts from.

A tick's report, saved after its actions, carries its guard memory: the changes it made (which
start cooldowns and spend disruption budget) and every recommendation (stabilization windows).
A process killed between acting and saving (OOM, node loss, SIGKILL) would leave the store's
newest memory one tick old, and the next tick, in this process or another, would allow a second
step at once: a crash loop could scale a pool down by ``max_step`` every restart. So an applying
tick first saves the memory it leaves if every change it planned is made (the cautious reading:
a change that then failed holds its cooldown until the next tick's record replaces it), in one
row replaced each tick; the newest memory is that row's when no tick record was saved after it
(judged by the records' ids, not clocks), else the newest record's. A dry run saves no intent:
it changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import SQLModel

from controlplane.domain.fleet_status import UnrecordedTick
from controlplane.domain.guards import GuardMemory
from controlplane.store import codec
from controlplane.store.tables import GuardIntentRecord, TickRecord
from controlplane.store.utc import as_utc

log = logging.getLogger("headroom.reconcile")
SLOT = 1


@dataclass(frozen=True, slots=True)
class _Intent:
    started_at: datetime
    memory_json: str
    writer: str | None
    after_tick_id: int | None  # the newest tick record when it was saved (None: there was none)


def _newest_tick(connection: Connection) -> tuple[int, str] | None:
    ticks = SQLModel.metadata.tables[str(TickRecord.__tablename__)].c
    row = connection.execute(select(ticks.id, ticks.guard_memory_json)
                             .order_by(ticks.id.desc()).limit(1)).first()
    return None if row is None else (int(row[0]), str(row[1]))


def _pending(connection: Connection) -> tuple[_Intent | None, tuple[int, str] | None]:
    """The intent when no tick record was saved after it (its tick left none yet), and the
    newest tick record. Judged by the records' ids, not by clocks: two replicas' clocks may
    disagree, a database sequence does not."""
    tick = _newest_tick(connection)
    intents = SQLModel.metadata.tables[str(GuardIntentRecord.__tablename__)].c
    row = connection.execute(select(intents.started_at, intents.memory_json, intents.writer,
                                    intents.after_tick_id)
                             .where(intents.slot == SLOT)).first()
    if row is None or (None if tick is None else tick[0]) != row[3]:
        return None, tick
    return _Intent(as_utc(row[0]), str(row[1]), row[2], row[3]), tick


def unrecorded_tick(connection: Connection) -> UnrecordedTick | None:
    """The tick that saved its intent and no record since: one in progress, or one killed
    after it may have acted (``headroom status`` says so); None when there is none."""
    intent, _ = _pending(connection)
    return None if intent is None else UnrecordedTick(intent.started_at, intent.writer)


def newest_guard_memory(connection: Connection) -> GuardMemory:
    """The intent's memory when no tick record was saved after it (its tick was killed before
    its record was saved), else the newest record's; empty when neither."""
    intent, tick = _pending(connection)
    if intent is not None:
        return codec.guard_memory_from_json(intent.memory_json)
    return GuardMemory() if tick is None else codec.guard_memory_from_json(tick[1])


def save_intent(connection: Connection, started_at: datetime, memory: GuardMemory,
                writer: str | None) -> None:
    """Replace the intent with ``memory`` of the tick started at ``started_at``; logs
    ``tick.unrecorded`` when the intent it replaces belongs to a tick that left no record."""
    intent, tick = _pending(connection)
    if intent is not None:
        log.warning("tick.unrecorded", extra={
            "started_at": intent.started_at.isoformat(), "writer": intent.writer or "unknown",
            "kept": "the store has no record of it (killed before its save, or the save "
                    "failed); it may have acted: its guard memory, every planned change "
                    "counted as made, was the newest and this tick started from it"})
    values = {"slot": SLOT, "started_at": started_at,
              "memory_json": codec.guard_memory_to_json(memory), "writer": writer,
              "after_tick_id": None if tick is None else tick[0]}
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    table = SQLModel.metadata.tables[str(GuardIntentRecord.__tablename__)]
    insert = dialect.insert(table).values(**values)
    connection.execute(insert.on_conflict_do_update(
        index_elements=["slot"], set_={k: v for k, v in values.items() if k != "slot"}))
