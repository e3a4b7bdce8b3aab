"""Apply any plan action through the actuator ports (Kubernetes, simulated or gated alike)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from controlplane.domain.actions import (
    Action,
    ActionOutcome,
    ApplySharing,
    NodeAction,
    RelayoutMig,
    ScaleNodePool,
    SetReplicas,
)
from controlplane.domain.errors import TransientError
from controlplane.ports import (
    MigRelayoutActuator,
    NodePoolActuator,
    ReplicaActuator,
    SharingActuator,
)

log = logging.getLogger("headroom.k8s.executor")
AnyAction = Action | NodeAction


@dataclass(frozen=True, slots=True)
class Actuators:
    node_pools: NodePoolActuator
    replicas: ReplicaActuator
    sharing: SharingActuator
    mig: MigRelayoutActuator


def apply_action(action: AnyAction, actuators: Actuators) -> ActionOutcome:
    try:
        if isinstance(action, ScaleNodePool):
            outcome = actuators.node_pools.set_size(action.pool, action.to_nodes)
        elif isinstance(action, SetReplicas):
            outcome = actuators.replicas.set_replicas(action.model, action.to_replicas)
        elif isinstance(action, ApplySharing):
            outcome = actuators.sharing.apply_sharing(action.node, action.to_layout)
        elif isinstance(action, RelayoutMig):
            outcome = actuators.mig.start_relayout(action.node, action.to_layout, action.reason)
        else:  # pragma: no cover - the union is exhaustive
            raise TypeError(f"unknown action {action!r}")
    except TransientError as error:
        outcome = ActionOutcome(action.target, False, str(error), retryable=True)
    log.info("action.applied" if outcome.ok else "action.failed", extra=action.to_log())
    return outcome


def apply_actions(actions: Iterable[AnyAction], actuators: Actuators) -> tuple[ActionOutcome, ...]:
    """Apply in plan order (scale-ups, replicas, node changes, scale-downs as planned)."""
    return tuple(apply_action(action, actuators) for action in actions)
