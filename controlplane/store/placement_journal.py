"""The placement journal in the SQL store (Alembic revisions 0008, 0009, 0014, 0021): the bindings
and fleet plan that every placement engine on the store follows (``scheduler.journal``), so the
placement servers of one store (``headroom placement serve --db``, the replicas of ``headroom
serve``) answer as one and a restarted one knows where every workload runs.

``placement_journal`` holds one row: the journal's version (raised once by every change), the
current plan (its proto bytes, revision and the version that wrote it) and which process changed it
last. ``placement_bindings`` holds a row per workload bound, with its lease (0009), the model and
tenant its Place named (0014; '' on rows journaled before: not known), what it asked of each GPU
(0021: allowed products and stated memory, which a re-SyncInventory checks; any and none on rows
journaled before), the version that bound it or last renewed its lease and, once released, the
version that released it (a tombstone, so other engines learn of the release). A change first locks
the journal row (``UPDATE ... RETURNING``: PostgreSQL's row lock, SQLite's write lock), reads what
changed since the engine's version and commits with the engine's writes in the same transaction.
Every ``prune_every`` versions, tombstones older than ``keep_releases`` versions are deleted; an
engine further behind than that reads a full snapshot. Database errors are ``Unavailable``
(UNAVAILABLE to the caller).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Float,
    LargeBinary,
    Text,
    distinct,
    func,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, SQLModel

from controlplane.domain.errors import error_line
from controlplane.domain.fleet_status import PlacementStatus
from controlplane.ports import Clock
from controlplane.store.utc import UtcDateTime, as_utc
from protos.headroom.v1 import placement_pb2 as pb
from scheduler import convert
from scheduler.domain.errors import Unavailable
from scheduler.domain.fleet_types import FleetPlan
from scheduler.domain.model import Binding, SharingMode
from scheduler.journal import JournalChanges

JOURNAL_ROW = 1  # the journal's one row (written by the migration)
MISSING_ROW = "placement journal: its row is missing; run `headroom db upgrade`"


class PlacementJournalRecord(SQLModel, table=True):
    __tablename__ = "placement_journal"
    id: int = Field(primary_key=True)
    version: int = Field(sa_column=Column(BigInteger, nullable=False))
    pruned_version: int = Field(sa_column=Column(BigInteger, nullable=False))
    plan_version: int = Field(sa_column=Column(BigInteger, nullable=False))
    plan_revision: int = Field(sa_column=Column(BigInteger, nullable=False))
    plan: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    changed_by: str = Field(max_length=200)
    changed_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(),
                                                                       nullable=True))


class PlacementBindingRecord(SQLModel, table=True):
    __tablename__ = "placement_bindings"
    workload_id: str = Field(sa_column=Column(Text, primary_key=True))
    node: str = Field(sa_column=Column(Text, nullable=False))
    gpu_indices: str = Field(max_length=2000)  # JSON list of GPU indices on the node
    mode: str = Field(max_length=16)  # SharingMode value; "" for a CPU-only workload
    mig_profile: str = Field(max_length=32)
    mig_start: int
    gpu_milli: int
    gpu_memory_mib: int = Field(sa_column=Column(BigInteger, nullable=False))
    cpu_milli: int = Field(sa_column=Column(BigInteger, nullable=False))
    memory_mib: int = Field(sa_column=Column(BigInteger, nullable=False))
    reason: str = Field(sa_column=Column(Text, nullable=False))
    lease_s: float = Field(default=0.0, sa_column=Column(Float, nullable=False,
                                                         server_default="0"))
    lease_expires_at_s: float = Field(default=0.0, sa_column=Column(  # Unix seconds; 0 = never
        Float, nullable=False, server_default="0"))
    model: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    tenant: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    # what the Place asked of each GPU (0021): JSON list of allowed product keys, stated memory
    gpu_products: str = Field(default="[]", sa_column=Column(Text, nullable=False,
                                                             server_default="[]"))
    gpu_memory_request_mib: int = Field(default=0, sa_column=Column(
        BigInteger, nullable=False, server_default="0"))
    version: int = Field(sa_column=Column(BigInteger, nullable=False, index=True))
    released_version: int | None = Field(default=None, sa_column=Column(
        BigInteger, nullable=True, index=True))
    bound_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False))


def _journal() -> Any:
    return SQLModel.metadata.tables[str(PlacementJournalRecord.__tablename__)]


def _bindings() -> Any:
    return SQLModel.metadata.tables[str(PlacementBindingRecord.__tablename__)]


def binding_values(binding: Binding) -> dict[str, Any]:
    return {"node": binding.node, "gpu_indices": json.dumps(list(binding.gpu_indices)),
            "mode": binding.mode.value if binding.mode is not None else "",
            "mig_profile": binding.mig_profile, "mig_start": binding.mig_start,
            "gpu_milli": binding.gpu_milli, "gpu_memory_mib": binding.gpu_memory_mib,
            "cpu_milli": binding.cpu_milli, "memory_mib": binding.memory_mib,
            "reason": binding.reason, "lease_s": binding.lease_s,
            "lease_expires_at_s": binding.lease_expires_at_s, "model": binding.model,
            "tenant": binding.tenant, "gpu_products": json.dumps(list(binding.gpu_products)),
            "gpu_memory_request_mib": binding.gpu_memory_request_mib}


def binding_from(row: Any) -> Binding:
    return Binding(row.workload_id, row.node, tuple(int(i) for i in json.loads(row.gpu_indices)),
                   SharingMode(row.mode) if row.mode else None, row.mig_profile, row.gpu_milli,
                   row.reason, row.gpu_memory_mib, row.mig_start, row.cpu_milli, row.memory_mib,
                   row.lease_s, row.lease_expires_at_s, row.model or "", row.tenant or "",
                   tuple(str(p) for p in json.loads(row.gpu_products or "[]")),
                   int(row.gpu_memory_request_mib or 0))


class Head(NamedTuple):
    """The journal row without its plan: its version, the newest version whose release
    tombstones are pruned, and the version that wrote the plan."""

    version: int
    pruned_version: int
    plan_version: int


def _head_columns() -> tuple[Any, ...]:
    journal = _journal()
    return journal.c.version, journal.c.pruned_version, journal.c.plan_version


def changes_since(connection: Connection, since_version: int, head: Head) -> JournalChanges:
    """What changed after ``since_version``, given the journal's ``head`` read first."""
    bindings = _bindings()
    full = since_version <= 0 or since_version < head.pruned_version
    if not full and head.version <= since_version:  # nothing since: no query
        return JournalChanges(int(head.version), (), (), None)
    live = select(bindings).where(bindings.c.released_version.is_(None))
    if not full:
        live = live.where(bindings.c.version > since_version)
    bound = tuple(binding_from(r) for r in connection.execute(
        live.order_by(bindings.c.version, bindings.c.workload_id)))
    released: tuple[str, ...] = ()
    if not full:
        released = tuple(connection.execute(
            select(bindings.c.workload_id).where(bindings.c.released_version > since_version)
            .order_by(bindings.c.released_version)).scalars())
    plan = None
    if head.plan_version > 0 and (full or head.plan_version > since_version):
        blob = connection.execute(select(_journal().c.plan).where(
            _journal().c.id == JOURNAL_ROW)).scalar_one()
        plan = convert.fleet_plan_from_pb(pb.FleetPlan.FromString(blob)) if blob else None
    return JournalChanges(int(head.version), bound, released, plan, full)


def live_bindings(connection: Connection, node: str | None = None, model: str | None = None
                  ) -> tuple[tuple[Binding, datetime], ...]:
    """The workloads bound now (on ``node``, of ``model``, when given) with when, by node and
    workload: for ``headroom placement bindings`` and the dashboard's Fleet page."""
    bindings = _bindings()
    query = select(bindings).where(bindings.c.released_version.is_(None))
    if node is not None:
        query = query.where(bindings.c.node == node)
    if model is not None:
        query = query.where(bindings.c.model == model)
    rows = connection.execute(query.order_by(bindings.c.node, bindings.c.workload_id))
    return tuple((binding_from(r), as_utc(r.bound_at)) for r in rows)


def placement_status(connection: Connection) -> PlacementStatus | None:
    """The journal as ``headroom status`` shows it (None: its row is missing)."""
    journal, bindings = _journal(), _bindings()
    head = connection.execute(select(journal.c.version, journal.c.plan_revision,
                                     journal.c.changed_by, journal.c.changed_at)
                              .where(journal.c.id == JOURNAL_ROW)).first()
    if head is None:
        return None
    live = bindings.c.released_version.is_(None)
    count, nodes = connection.execute(select(
        func.count(), func.count(distinct(bindings.c.node))).where(live)).one()
    return PlacementStatus(int(count), int(nodes), int(head.version), int(head.plan_revision),
                           str(head.changed_by),
                           None if head.changed_at is None else as_utc(head.changed_at))


class SqlJournalChange:
    """One locked change (``SqlPlacementJournal.change``): writes at ``version``."""

    def __init__(self, connection: Connection, changes: JournalChanges, now: datetime) -> None:
        self.connection = connection
        self.changes = changes
        self.version = changes.version + 1
        self.now = now
        self.wrote = False
        self.committed_version: int | None = None

    def bound(self, binding: Binding) -> None:
        values = {**binding_values(binding), "version": self.version, "released_version": None,
                  "bound_at": self.now}
        dialect = postgresql if self.connection.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(_bindings()).values(workload_id=binding.workload_id, **values)
        self.connection.execute(statement.on_conflict_do_update(index_elements=["workload_id"],
                                                                set_=values))
        self.wrote = True

    def released(self, workload_ids: Sequence[str]) -> None:
        bindings = _bindings()
        self.connection.execute(
            update(bindings).where(bindings.c.workload_id.in_(list(workload_ids)),
                                   bindings.c.released_version.is_(None))
            .values(released_version=self.version))
        self.wrote = True

    def renewed(self, bindings: Sequence[Binding]) -> None:
        table = _bindings()
        for binding in bindings:
            self.connection.execute(
                update(table).where(table.c.workload_id == binding.workload_id,
                                    table.c.released_version.is_(None))
                .values(lease_expires_at_s=binding.lease_expires_at_s, version=self.version))
        self.wrote = True

    def planned(self, plan: FleetPlan) -> None:
        self.connection.execute(update(_journal()).where(_journal().c.id == JOURNAL_ROW).values(
            plan=convert.fleet_plan_to_pb(plan).SerializeToString(),
            plan_revision=plan.revision, plan_version=self.version))
        self.wrote = True


class SqlPlacementJournal:
    """PlacementJournal over the store's engine; ``holder`` names this process in the row."""

    def __init__(self, engine: Engine, holder: str, clock: Clock, keep_releases: int = 10_000,
                 prune_every: int = 1_000) -> None:
        self.engine = engine
        self.holder = holder
        self.clock = clock
        self.keep_releases = keep_releases
        self.prune_every = prune_every

    def read(self, since_version: int) -> JournalChanges:
        """The changes since ``since_version``, or a full snapshot when the release tombstones
        after it are pruned. The head and the changes are separate statements, each seeing the
        journal as committed when it runs (PostgreSQL READ COMMITTED; SQLite, whose reads take
        no lock between statements, likewise), so a change committed in between may have pruned
        tombstones the head said were kept: ``pruned_version`` is read again after the changes,
        and a reader it overtook gets the full snapshot it would have got from that head."""
        try:
            with self.engine.connect() as connection:
                changes = changes_since(connection, since_version, self._head(connection))
                if changes.full or changes.version <= since_version:
                    return changes  # a snapshot, or nothing since: no tombstone read
                head = self._head(connection)
                if since_version < head.pruned_version:  # pruned under the read: start over
                    return changes_since(connection, since_version, head)
                return changes
        except SQLAlchemyError as error:
            raise Unavailable(f"placement journal: cannot read it: {error_line(error)}"
                              ) from None

    @staticmethod
    def _head(connection: Connection) -> Head:
        row = connection.execute(select(*_head_columns()).where(
            _journal().c.id == JOURNAL_ROW)).first()
        if row is None:
            raise Unavailable(MISSING_ROW)
        return Head(*row)

    @contextmanager
    def change(self, since_version: int) -> Iterator[SqlJournalChange]:
        """One transaction: raise the version (which locks the row until the end), read the
        changes since ``since_version``, let the engine write; commit when it wrote, else roll
        back (the version stays)."""
        journal, now = _journal(), self.clock.now()
        try:
            with self.engine.connect() as connection, connection.begin() as transaction:
                row = connection.execute(
                    update(journal).where(journal.c.id == JOURNAL_ROW)
                    .values(version=journal.c.version + 1, changed_by=self.holder,
                            changed_at=now)
                    .returning(*_head_columns())).first()
                if row is None:
                    raise Unavailable(MISSING_ROW)
                head = Head(row[0] - 1, row[1], row[2])  # the version before this change
                change = SqlJournalChange(connection, changes_since(connection, since_version,
                                                                    head), now)
                yield change
                if not change.wrote:
                    transaction.rollback()
                elif change.version % self.prune_every == 0:
                    self._prune(connection, change.version - self.keep_releases)
        except SQLAlchemyError as error:
            raise Unavailable(f"placement journal: cannot record the change: "
                              f"{error_line(error)}") from None
        change.committed_version = change.version if change.wrote else change.changes.version

    @staticmethod
    def _prune(connection: Connection, below_version: int) -> None:
        """Delete the tombstones of releases at or below ``below_version``."""
        if below_version <= 0:
            return
        bindings = _bindings()
        connection.execute(bindings.delete().where(
            bindings.c.released_version.is_not(None),
            bindings.c.released_version <= below_version))
        connection.execute(update(_journal()).where(_journal().c.id == JOURNAL_ROW)
                           .values(pruned_version=below_version))
