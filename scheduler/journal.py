"""PlacementJournal: the port through which a placement engine keeps its state durable.

Without a journal the engine's bindings and fleet plan live in memory only: a restarted server
forgets where every workload runs (and would place new ones on the same GPUs) and starts its plan
revisions again at 1. With one (``headroom placement serve --db``, the store's
``SqlPlacementJournal``) every change is written before the caller hears of it, and a new engine
takes up where the last one stopped: its bindings wait for the first inventory and are re-adopted
where their node and GPUs still exist; its plan keeps its revision, so WatchPlan clients resume.

A journal write that fails raises ``scheduler.domain.errors.Unavailable``; the engine then leaves
its state as it was (nothing is half-applied) and the caller gets UNAVAILABLE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduler.domain.fleet_types import FleetPlan
from scheduler.domain.model import Binding


@dataclass(frozen=True, slots=True)
class JournalContents:
    """What the last engine left: its bindings and its current plan (None: never planned)."""

    bindings: tuple[Binding, ...]
    plan: FleetPlan | None


class PlacementJournal(Protocol):
    def take_over(self) -> JournalContents:
        """Make this engine the journal's only writer (an engine that wrote before stops being
        able to) and return what is recorded."""
        ...

    def bound(self, binding: Binding) -> None:
        """Record a new binding."""
        ...

    def released(self, workload_ids: Sequence[str]) -> None:
        """Forget these bindings (released, or dropped by a new inventory)."""
        ...

    def planned(self, plan: FleetPlan) -> None:
        """Record the new current plan (it replaces the previous one)."""
        ...
