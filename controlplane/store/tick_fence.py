"""Fencing tokens for the store writes a leader makes: tick records, guard intents, the tick's
observations, its forecast-calibration ledger, MIG re-layout steps and forecast refreshes.

The Kubernetes Lease (or the store's fleet lease) decides who leads, and the leader's cluster
writes end by its renew deadline (``adapters/k8s/fence.py``). Its store writes need their own
fence: a leader that stalls (a GC pause, a frozen VM, a PostgreSQL that answers late) can save
a tick record after another replica took over and saved newer ones, and that late record, being
the newest row, would become the guard memory the new leader's next tick starts from. So each
leadership term claims the next token of one row (``claim``: an atomic increment), and every
record or intent is saved in the same transaction as a check that its token is still the
newest (``check``: ``UPDATE ... WHERE token = <mine>``, which on PostgreSQL also locks the row
until the save commits, so a claim waits for a save in flight and a save after a claim fails).
A refused save raises ``Fenced``: the tick does not act (an intent, an observation, a ledger
write), its record is dropped, a re-layout step is not moved on, a refresh stores no forecast.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, Table, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import SQLModel

from controlplane.domain.errors import Fenced
from controlplane.domain.fleet_status import FenceStatus
from controlplane.store.tables import TickFenceRecord
from controlplane.store.utc import as_utc

TICKS = "ticks"


def _table() -> Table:
    return SQLModel.metadata.tables[str(TickFenceRecord.__tablename__)]


def claim(connection: Connection, holder: str, now: datetime) -> int:
    """The next token, claimed for ``holder``: every token before it is fenced off."""
    table = _table()
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    connection.execute(dialect.insert(table).values(
        name=TICKS, token=0, holder="", claimed_at=now).on_conflict_do_nothing(
        index_elements=["name"]))
    connection.execute(update(table).where(table.c.name == TICKS).values(
        token=table.c.token + 1, holder=holder[:200], claimed_at=now))
    token = connection.execute(select(table.c.token).where(table.c.name == TICKS)).scalar_one()
    return int(token)


def check(connection: Connection, token: int | None) -> None:
    """Raise ``Fenced`` unless ``token`` is the newest claimed; within the caller's
    transaction, which it keeps from a concurrent claim until it ends. None: unfenced, no
    check."""
    if token is None:
        return
    table = _table()
    kept = connection.execute(update(table).where(table.c.name == TICKS, table.c.token == token)
                              .values(token=table.c.token))
    if kept.rowcount == 1:
        return
    claimed = newest(connection)
    raise Fenced(token, None if claimed is None else claimed.token,
                 "" if claimed is None else claimed.holder)


def newest(connection: Connection) -> FenceStatus | None:
    """The newest token and who claimed it when; None before the first claim."""
    table = _table()
    row = connection.execute(select(table.c.token, table.c.holder, table.c.claimed_at)
                             .where(table.c.name == TICKS, table.c.token > 0)).first()
    if row is None:
        return None
    return FenceStatus(int(row.token), str(row.holder), as_utc(row.claimed_at))
