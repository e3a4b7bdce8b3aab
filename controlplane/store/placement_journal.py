"""The placement engine's journal in the SQL store (Alembic revision 0008): what
``headroom placement serve --db`` keeps across restarts (``scheduler.journal``).

Two tables: ``placement_bindings`` (one row per bound workload) and ``placement_journal`` (one
row: the current writer's epoch and holder, and the current fleet plan as its proto bytes with
its revision). A server takes the journal over by raising the epoch; every later write first
updates that row where the epoch is still its own, in the change's transaction, so a server
whose journal another one took over writes nothing more (UNAVAILABLE, naming the new holder)
instead of interleaving with it. A database error is UNAVAILABLE too; the engine then leaves its
state as it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Engine,
    LargeBinary,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, SQLModel

from controlplane.ports import Clock
from controlplane.store.engine import error_line
from controlplane.store.repository import as_utc
from protos.headroom.v1 import placement_pb2 as pb
from scheduler import convert
from scheduler.domain.errors import Unavailable
from scheduler.domain.fleet_types import FleetPlan
from scheduler.domain.model import Binding, SharingMode
from scheduler.journal import JournalContents

_ROW = 1  # the journal's one row


class PlacementJournalRecord(SQLModel, table=True):
    __tablename__ = "placement_journal"
    id: int = Field(primary_key=True)
    epoch: int = Field(sa_column=Column(BigInteger, nullable=False))
    holder: str = Field(max_length=200)
    taken_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    plan_revision: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    plan: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))


class PlacementBindingRecord(SQLModel, table=True):
    __tablename__ = "placement_bindings"
    workload_id: str = Field(sa_column=Column(Text, primary_key=True))
    node: str = Field(sa_column=Column(Text, nullable=False, index=True))
    gpu_indices: str = Field(max_length=2000)  # JSON list of GPU indices on the node
    mode: str = Field(max_length=16)  # SharingMode value; "" for a CPU-only workload
    mig_profile: str = Field(max_length=32)
    mig_start: int
    gpu_milli: int
    gpu_memory_mib: int = Field(sa_column=Column(BigInteger, nullable=False))
    cpu_milli: int = Field(sa_column=Column(BigInteger, nullable=False))
    memory_mib: int = Field(sa_column=Column(BigInteger, nullable=False))
    reason: str = Field(sa_column=Column(Text, nullable=False))
    bound_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


def _table(record: type[SQLModel]) -> Any:
    return SQLModel.metadata.tables[str(record.__tablename__)]


def binding_row(binding: Binding, bound_at: datetime) -> dict[str, Any]:
    return {"workload_id": binding.workload_id, "node": binding.node,
            "gpu_indices": json.dumps(list(binding.gpu_indices)),
            "mode": binding.mode.value if binding.mode is not None else "",
            "mig_profile": binding.mig_profile, "mig_start": binding.mig_start,
            "gpu_milli": binding.gpu_milli, "gpu_memory_mib": binding.gpu_memory_mib,
            "cpu_milli": binding.cpu_milli, "memory_mib": binding.memory_mib,
            "reason": binding.reason, "bound_at": bound_at}


def binding_from(row: Any) -> Binding:
    return Binding(row.workload_id, row.node, tuple(int(i) for i in json.loads(row.gpu_indices)),
                   SharingMode(row.mode) if row.mode else None, row.mig_profile, row.gpu_milli,
                   row.reason, row.gpu_memory_mib, row.mig_start, row.cpu_milli, row.memory_mib)


class SqlPlacementJournal:
    """PlacementJournal over the store's engine; ``holder`` names this server in the row."""

    def __init__(self, engine: Engine, holder: str, clock: Clock) -> None:
        self.engine = engine
        self.holder = holder
        self.clock = clock
        self.epoch: int | None = None  # set by take_over

    def take_over(self) -> JournalContents:
        journal, bindings = _table(PlacementJournalRecord), _table(PlacementBindingRecord)
        now = self.clock.now()
        try:
            with self.engine.begin() as connection:
                raised = connection.execute(
                    update(journal).where(journal.c.id == _ROW)
                    .values(epoch=journal.c.epoch + 1, holder=self.holder, taken_at=now)
                    .returning(journal.c.epoch, journal.c.plan)).first()
                if raised is None:
                    connection.execute(insert(journal).values(
                        id=_ROW, epoch=1, holder=self.holder, taken_at=now, plan_revision=0,
                        plan=None))
                    epoch, plan_bytes = 1, None
                else:
                    epoch, plan_bytes = int(raised.epoch), raised.plan
                rows = connection.execute(
                    select(bindings).order_by(bindings.c.bound_at, bindings.c.workload_id)).all()
        except SQLAlchemyError as error:
            raise Unavailable(f"placement journal: cannot take it over: {error_line(error)}"
                              ) from None
        self.epoch = epoch
        plan = (convert.fleet_plan_from_pb(pb.FleetPlan.FromString(plan_bytes))
                if plan_bytes else None)
        return JournalContents(tuple(binding_from(r) for r in rows), plan)

    def bound(self, binding: Binding) -> None:
        self._write("record the binding of " + repr(binding.workload_id), lambda c: c.execute(
            insert(_table(PlacementBindingRecord)).values(
                binding_row(binding, self.clock.now()))))

    def released(self, workload_ids: Sequence[str]) -> None:
        bindings = _table(PlacementBindingRecord)
        ids = list(workload_ids)
        self._write(f"forget {len(ids)} binding(s)", lambda c: c.execute(
            delete(bindings).where(bindings.c.workload_id.in_(ids))))

    def planned(self, plan: FleetPlan) -> None:
        journal = _table(PlacementJournalRecord)
        blob = convert.fleet_plan_to_pb(plan).SerializeToString()
        self._write(f"record plan revision {plan.revision}", lambda c: c.execute(
            update(journal).where(journal.c.id == _ROW)
            .values(plan_revision=plan.revision, plan=blob)))

    def _write(self, what: str, change: Any) -> None:
        """``change(connection)`` in one transaction that first confirms (and locks) this
        server's epoch; Unavailable when the epoch is another server's or the write fails."""
        if self.epoch is None:
            raise Unavailable(f"placement journal: cannot {what}: not taken over yet")
        journal = _table(PlacementJournalRecord)
        try:
            with self.engine.begin() as connection:
                mine = connection.execute(
                    update(journal).where(journal.c.id == _ROW, journal.c.epoch == self.epoch)
                    .values(epoch=self.epoch).returning(journal.c.epoch)).first()
                if mine is None:
                    raise Unavailable(self._taken(connection, what))
                change(connection)
        except SQLAlchemyError as error:
            raise Unavailable(f"placement journal: cannot {what}: {error_line(error)}"
                              ) from None

    def _taken(self, connection: Connection, what: str) -> str:
        journal = _table(PlacementJournalRecord)
        row = connection.execute(select(journal.c.holder, journal.c.taken_at)
                                 .where(journal.c.id == _ROW)).first()
        by = (f"{row.holder} took it over at {as_utc(row.taken_at):%Y-%m-%dT%H:%M:%SZ}"
              if row is not None else "its row is gone")
        return (f"placement journal: cannot {what}: {by}; this server no longer changes the "
                "store's placement state (stop it, or restart it to take the state back)")
