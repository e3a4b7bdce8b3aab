"""Apply a plan's actions through the actuator ports, in plan order (Kubernetes, simulated or
leader-gated alike): the reconcile loop's, and any plan a test or tool applies by hand."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from controlplane.domain.actions import (
    Action,
    ActionOutcome,
    ApplySharing,
    RelayoutMig,
    ScaleNodePool,
    SetReplicas,
)
from controlplane.domain.errors import Fenced, TransientError
from controlplane.ports import (
    MigRelayoutActuator,
    NodePoolActuator,
    ReplicaActuator,
    SharingActuator,
)

log = logging.getLogger("headroom.actuation")


@dataclass(frozen=True, slots=True)
class Actuators:
    node_pools: NodePoolActuator
    replicas: ReplicaActuator
    sharing: SharingActuator | None = None  # node layouts (none: such actions fail, named)
    mig: MigRelayoutActuator | None = None


def _dispatch(action: Action, actuators: Actuators) -> ActionOutcome:
    if isinstance(action, ScaleNodePool):
        return actuators.node_pools.set_size(action.pool, action.to_nodes)
    if isinstance(action, SetReplicas):
        return actuators.replicas.set_replicas(action.model, action.to_replicas)
    if isinstance(action, ApplySharing) and actuators.sharing is not None:
        return actuators.sharing.apply_sharing(action.node, action.to_layout)
    if isinstance(action, RelayoutMig) and actuators.mig is not None:
        return actuators.mig.start_relayout(action.node, action.to_layout, action.reason)
    return ActionOutcome(action.target, False, f"no actuator for {action.kind}")


def apply_action(action: Action, actuators: Actuators) -> ActionOutcome:
    """One action; an unreachable API is a retryable failed outcome, not an exception, and so
    is a record the store fenced off (a re-layout started by a leader another replica replaced:
    ``not_leader``, not retried by this process)."""
    try:
        outcome = _dispatch(action, actuators)
    except TransientError as error:
        outcome = ActionOutcome(action.target, False, str(error), retryable=True)
    except Fenced as error:  # its record refused: another term leads the store now
        outcome = ActionOutcome(action.target, False, f"not_leader: {error}")
    _log_outcome(action, outcome)
    return outcome


def _log_outcome(action: Action, outcome: ActionOutcome) -> None:
    """``action.applied`` at INFO; ``action.failed`` at WARNING with the error and whether a
    retry may help, so a failure that repeats every tick is seen in the logs for what it is."""
    if outcome.ok:
        log.info("action.applied", extra=action.to_log())
    else:
        log.warning("action.failed", extra={**action.to_log(), "error": outcome.message,
                                            "retryable": outcome.retryable})


def apply_actions(actions: Iterable[Action], actuators: Actuators) -> tuple[ActionOutcome, ...]:
    """Every action in order, except that a node's MIG re-layout starts only once the sharing
    change planned before it (MIG is exclusive) has been applied; otherwise its outcome says why
    and is retryable as that change was."""
    outcomes = []
    failed: dict[str, ActionOutcome] = {}  # node -> its sharing change that failed
    for action in actions:
        first = failed.get(action.target) if isinstance(action, RelayoutMig) else None
        if first is None:
            outcome = apply_action(action, actuators)
        else:
            outcome = ActionOutcome(action.target, False, "not started: the sharing it needs "
                                    f"first is not applied ({first.message})", first.retryable)
            _log_outcome(action, outcome)
        if isinstance(action, ApplySharing) and not outcome.ok:
            failed[action.target] = outcome
        outcomes.append(outcome)
    return tuple(outcomes)
