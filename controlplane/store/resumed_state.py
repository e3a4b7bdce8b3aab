"""The fleet as the newest tick left it, for a simulated fleet resuming its store.

A tick's record carries what it observed before it acted: a fleet rebuilt from that alone would
undo the tick's own changes (each model's replicas and each pool's nodes back at the targets
before it), and the resumed loop's first tick would make them a second time. So the changes the
tick applied (its actions whose outcome was ok) are laid over its observation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from controlplane.domain.observed import ObservedState
from controlplane.store import codec
from controlplane.store.tables import ActionRecord, OutcomeRecord, PlanRecord, TickRecord


def with_applied(observed: ObservedState, replicas: Mapping[str, int],
                 nodes: Mapping[str, int]) -> ObservedState:
    """``observed`` with each model's replica target in ``replicas`` and each pool's node target
    in ``nodes`` (what a tick applied after it observed); the others as observed."""
    return replace(
        observed,
        models=tuple(replace(m, replicas_target=replicas[m.name]) if m.name in replicas else m
                     for m in observed.models),
        pools=tuple(replace(p, target_nodes=nodes[p.name]) if p.name in nodes else p
                    for p in observed.pools))


def last_tick_state(engine: Engine) -> ObservedState | None:
    """The newest tick's observation with the replica and node pool targets it applied (None:
    no tick recorded)."""
    with Session(engine) as session:
        tick = session.exec(select(TickRecord.id, TickRecord.observed_json)
                            .order_by(col(TickRecord.id).desc()).limit(1)).first()
        if tick is None:
            return None
        applied = session.exec(
            select(ActionRecord.kind, ActionRecord.target, ActionRecord.to_value)
            .join(PlanRecord, col(PlanRecord.id) == col(ActionRecord.plan_id))
            .join(OutcomeRecord, col(OutcomeRecord.action_id) == col(ActionRecord.id))
            .where(PlanRecord.tick_id == tick[0], col(OutcomeRecord.ok).is_(True),
                   col(ActionRecord.kind).in_(("set_replicas", "scale_node_pool")))
            .order_by(col(ActionRecord.ordinal))).all()
    return with_applied(codec.observed_from_json(tick[1]),
                        {target: to for kind, target, to in applied if kind == "set_replicas"},
                        {target: to for kind, target, to in applied if kind == "scale_node_pool"})
