"""The profiles the loop sized its models with, as the newest tick that recorded any stored
them: one query for the loop's store, ``headroom status`` and the dashboard."""

from __future__ import annotations

from sqlalchemy import Connection, select
from sqlmodel import SQLModel

from controlplane.domain.profile import ProfileCorrection
from controlplane.store import codec
from controlplane.store.tables import TickRecord


def newest_profiles(connection: Connection) -> tuple[ProfileCorrection, ...]:
    """Each model's offline and corrected throughput per replica with its reason, from the
    newest tick with profiles (none recorded: empty)."""
    ticks = SQLModel.metadata.tables[str(TickRecord.__tablename__)].c
    text = connection.execute(select(ticks.profiles_json)
                              .where(ticks.profiles_json.is_not(None))
                              .order_by(ticks.id.desc()).limit(1)).scalar()
    return codec.profiles_from_json(text)
