"""A plan is data: ordered actions and skipped changes, each with a reason; renders as a diff."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from controlplane.domain.actions import Action, NodeAction, ScaleNodePool, SkippedAction


@dataclass(frozen=True, slots=True)
class Plan:
    created_at: datetime
    actions: tuple[Action, ...]
    skipped: tuple[SkippedAction, ...]

    def with_node_actions(self, actions: tuple[NodeAction, ...],
                          skipped: tuple[SkippedAction, ...]) -> Plan:
        """This plan with node layout changes before its pool scale-downs (a drained node's
        replicas may need the capacity those would remove)."""
        downs = tuple(a for a in self.actions
                      if isinstance(a, ScaleNodePool) and a.to_nodes < a.from_nodes)
        rest = tuple(a for a in self.actions if a not in downs)
        return Plan(self.created_at, (*rest, *actions, *downs), (*self.skipped, *skipped))

    @property
    def is_noop(self) -> bool:
        return not self.actions

    def render(self) -> str:
        lines = [a.render() for a in self.actions] + [s.render() for s in self.skipped]
        return "\n".join(lines) if lines else "no changes"
