"""A plan is data: ordered actions and skipped changes, each with a reason; renders as a diff."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from controlplane.domain.actions import Action, SkippedAction


@dataclass(frozen=True, slots=True)
class Plan:
    created_at: datetime
    actions: tuple[Action, ...]
    skipped: tuple[SkippedAction, ...]

    @property
    def is_noop(self) -> bool:
        return not self.actions

    def render(self) -> str:
        lines = [a.render() for a in self.actions] + [s.render() for s in self.skipped]
        return "\n".join(lines) if lines else "no changes"
