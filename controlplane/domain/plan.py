"""A plan is data: ordered actions and skipped changes, each with a reason; renders as a diff."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from controlplane.domain.actions import Action, NodeAction, ScaleNodePool, SkippedAction


@dataclass(frozen=True, slots=True)
class KeptReplicas:
    """Replicas of a model that run though the placement counts none of them: those the guards
    keep over its target (a scale-down held back), or all of a model held while unplaced. The
    planner keeps their nodes; the plan records them so showback bills their GPUs
    (``replicas`` x ``gpu_share`` of ``product``) to the model rather than as idle."""

    model: str
    replicas: int
    product: str
    gpu_share: float  # of one GPU per replica; whole numbers > 1: GPUs per replica

    @property
    def gpus(self) -> float:
        return self.replicas * self.gpu_share


@dataclass(frozen=True, slots=True)
class Plan:
    created_at: datetime
    actions: tuple[Action, ...]
    skipped: tuple[SkippedAction, ...]
    kept: tuple[KeptReplicas, ...] = ()  # replicas running beyond the placement's

    def with_node_actions(self, actions: tuple[NodeAction, ...],
                          skipped: tuple[SkippedAction, ...]) -> Plan:
        """This plan with node layout changes before its pool scale-downs (a drained node's
        replicas may need the capacity those would remove)."""
        downs = tuple(a for a in self.actions
                      if isinstance(a, ScaleNodePool) and a.to_nodes < a.from_nodes)
        rest = tuple(a for a in self.actions if a not in downs)
        return replace(self, actions=(*rest, *actions, *downs),
                       skipped=(*self.skipped, *skipped))

    @property
    def is_noop(self) -> bool:
        return not self.actions

    def render(self) -> str:
        lines = [a.render() for a in self.actions] + [s.render() for s in self.skipped]
        return "\n".join(lines) if lines else "no changes"
