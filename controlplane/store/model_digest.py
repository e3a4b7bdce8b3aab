"""The models table read for ``serve``'s reload: a digest of every model's spec columns (not its
pause, which every tick reads anyway) and, only when that changed, the specs, in one query, so
a tick that finds the models as they were decodes nothing."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import Engine, select
from sqlmodel import SQLModel

from controlplane.domain.models import ModelSpec
from controlplane.store import codec
from controlplane.store.tables import ModelRecord


def _models() -> Any:
    return SQLModel.metadata.tables[str(ModelRecord.__tablename__)].c


def model_specs_unless(engine: Engine, digest: str | None
                       ) -> tuple[str, tuple[ModelSpec, ...] | None]:
    """The models table's digest and, unless it is ``digest``, its specs by name."""
    m = _models()
    with engine.connect() as connection:
        rows = connection.execute(select(
            m.name, m.tenant, m.isolation, m.engine, m.latency_slo_ms, m.cold_start_p50_s,
            m.cold_start_p90_s, m.profile_json, m.min_replicas, m.max_replicas,
        ).order_by(m.name)).all()
    columns = [tuple(row) for row in rows]
    now = hashlib.sha256(json.dumps(columns).encode()).hexdigest()
    if now == digest:
        return now, None
    return now, tuple(codec.spec_from_columns(*c) for c in columns)


def model_specs_digested(engine: Engine) -> tuple[str, tuple[ModelSpec, ...]]:
    """The models table's specs by name and their digest (``model_specs_unless``'s)."""
    digest, specs = model_specs_unless(engine, None)
    return digest, specs or ()
