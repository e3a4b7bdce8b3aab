"""What the store says its clock is (``controlplane.domain.store_clock``): whether a simulated
fleet drives it (its ``sim-fleet`` lease row) and its last tick."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, Engine, inspect, select
from sqlmodel import SQLModel

from controlplane.domain.store_clock import StoreNow, store_now
from controlplane.store.tables import LeaseRowRecord, TickRecord
from controlplane.store.utc import as_utc


def store_now_in(connection: Connection, lease_name: str, wall_now: datetime) -> StoreNow:
    """Now for the store ``connection`` reads, a simulated fleet's when its lease
    ``lease_name`` is in the store (``headroom status``'s test of a simulated store)."""
    tables = set(inspect(connection).get_table_names())
    ticks = SQLModel.metadata.tables[str(TickRecord.__tablename__)].c
    simulated = "leases" in tables and _has_lease(connection, lease_name)
    last = connection.execute(select(ticks.started_at).order_by(ticks.id.desc()).limit(1)
                              ).scalar_one_or_none() if "ticks" in tables else None
    return store_now(simulated, None if last is None else as_utc(last), wall_now)


def _has_lease(connection: Connection, lease_name: str) -> bool:
    leases = SQLModel.metadata.tables[str(LeaseRowRecord.__tablename__)].c
    return connection.execute(
        select(leases.name).where(leases.name == lease_name)).first() is not None


def simulated_store(engine: Engine, lease_name: str) -> bool:
    """Whether a simulated fleet runs on the store (or ran: a released lease stays a row): its
    lease ``lease_name`` is in the store."""
    with engine.connect() as connection:
        return ("leases" in inspect(connection).get_table_names()
                and _has_lease(connection, lease_name))


def read_store_now(engine: Engine, lease_name: str, wall_now: datetime) -> StoreNow:
    with engine.connect() as connection:
        return store_now_in(connection, lease_name, wall_now)
