"""Persisted MIG re-layout state machines (one row per relayout; Alembic revisions 0002, 0015:
``was_cordoned``, False on rows saved before).

Every step of a relayout is saved in its own transaction after its effects ran, so a crashed
process resumes each active relayout from the last saved phase (see domain/mig_relayout.py).
Under ``headroom serve --backend kubernetes`` each save is fenced by the leader's term, as its
tick records are (``store/tick_fence.py``): a deposed leader cannot save a step late over the
next leader's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Column, Engine, Text, false
from sqlmodel import Field, Session, SQLModel, col, select

from controlplane.domain.mig_layout import NodeMigLayout, layout_from_entries, mig_parted_entries
from controlplane.domain.mig_relayout import TERMINAL, MigRelayout, RelayoutPhase
from controlplane.store import tick_fence
from controlplane.store.tables import NODE_NAME_CHARS
from controlplane.store.utc import UtcDateTime, as_utc


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else as_utc(value)


class MigRelayoutRecord(SQLModel, table=True):
    __tablename__ = "mig_relayouts"
    relayout_id: str = Field(primary_key=True, max_length=NODE_NAME_CHARS)
    node: str = Field(max_length=NODE_NAME_CHARS, index=True)
    pool: str = Field(max_length=100)
    product: str = Field(max_length=64)
    from_config: str = Field(max_length=100)
    to_config: str = Field(max_length=100)
    to_layout_json: str = Field(sa_column=Column(Text, nullable=False))
    phase: str = Field(max_length=32, index=True)
    active: bool = Field(index=True)
    started_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False))
    updated_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False))
    deadline_at: datetime | None = Field(
        default=None, sa_column=Column(UtcDateTime(), nullable=True))
    surge_nodes: int = 0
    wait_reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    alert: str = Field(default="", sa_column=Column(Text, nullable=False))
    reason: str = Field(default="", max_length=200)
    was_cordoned: bool = Field(default=False, sa_column=Column(
        Boolean, nullable=False, server_default=false()))


def layout_to_json(layout: NodeMigLayout) -> str:
    return json.dumps({"product": layout.product, "entries": mig_parted_entries(layout)},
                      sort_keys=True)


def layout_from_json(text: str) -> NodeMigLayout:
    raw: dict[str, Any] = json.loads(text)
    return layout_from_entries(raw["product"], raw["entries"])


def to_record(r: MigRelayout) -> MigRelayoutRecord:
    return MigRelayoutRecord(
        relayout_id=r.relayout_id, node=r.node, pool=r.pool, product=r.to_layout.product,
        from_config=r.from_config, to_config=r.to_config,
        to_layout_json=layout_to_json(r.to_layout), phase=r.phase.value, active=r.is_active,
        started_at=r.started_at, updated_at=r.updated_at, deadline_at=r.deadline_at,
        surge_nodes=r.surge_nodes, wait_reason=r.wait_reason, alert=r.alert, reason=r.reason,
        was_cordoned=r.was_cordoned)


def from_record(row: MigRelayoutRecord) -> MigRelayout:
    started_at, updated_at = _utc(row.started_at), _utc(row.updated_at)
    assert started_at is not None and updated_at is not None
    return MigRelayout(
        relayout_id=row.relayout_id, node=row.node, pool=row.pool, from_config=row.from_config,
        to_config=row.to_config, to_layout=layout_from_json(row.to_layout_json),
        phase=RelayoutPhase(row.phase), started_at=started_at, updated_at=updated_at,
        deadline_at=_utc(row.deadline_at), surge_nodes=row.surge_nodes,
        wait_reason=row.wait_reason, alert=row.alert, reason=row.reason,
        was_cordoned=row.was_cordoned)


class SqlRelayoutStore:
    """RelayoutStore over the SQL store's engine (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine, fence: Callable[[], int | None] | None = None) -> None:
        """``fence``: the fencing token of the leadership term this process holds (the tick
        records', ``RetryingDecisionStore.fence_token``); each save is refused (``Fenced``)
        once another term claimed a newer one. None, or a token of None: unfenced."""
        self.engine = engine
        self.fence = fence

    def save_relayout(self, relayout: MigRelayout) -> None:
        token = None if self.fence is None else self.fence()
        with Session(self.engine) as session:
            tick_fence.check(session.connection(), token)
            session.merge(to_record(relayout))
            session.commit()

    def active_relayouts(self) -> tuple[MigRelayout, ...]:
        with Session(self.engine) as session:
            rows = session.exec(select(MigRelayoutRecord)
                                .where(col(MigRelayoutRecord.active).is_(True))
                                .order_by(col(MigRelayoutRecord.started_at))).all()
            return tuple(from_record(r) for r in rows)

    def relayouts_of(self, node: str) -> tuple[MigRelayout, ...]:
        """Every relayout of ``node``, oldest first (finished ones included)."""
        with Session(self.engine) as session:
            rows = session.exec(select(MigRelayoutRecord)
                                .where(MigRelayoutRecord.node == node)
                                .order_by(col(MigRelayoutRecord.started_at))).all()
            return tuple(from_record(r) for r in rows)


class MemoryRelayoutStore:
    """In-memory RelayoutStore (tests, dry runs): same contract, no durability."""

    def __init__(self) -> None:
        self._rows: dict[str, MigRelayout] = {}

    def save_relayout(self, relayout: MigRelayout) -> None:
        self._rows[relayout.relayout_id] = relayout

    def active_relayouts(self) -> tuple[MigRelayout, ...]:
        return tuple(sorted((r for r in self._rows.values() if r.phase not in TERMINAL),
                            key=lambda r: r.started_at))

    def relayouts_of(self, node: str) -> tuple[MigRelayout, ...]:
        return tuple(sorted((r for r in self._rows.values() if r.node == node),
                            key=lambda r: r.started_at))
