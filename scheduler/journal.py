"""PlacementJournal: the port through which placement engines share and keep their state.

Without a journal an engine's bindings and fleet plan live in its memory: a restarted server
forgets where every workload runs (and would place new ones on the same GPUs) and starts its
plan revisions again at 1, and two servers each answer from their own bindings. With one
(``headroom placement serve --db``, ``headroom serve``: the store's ``SqlPlacementJournal``) the
journal is the record every engine on it follows:

- each change (Place, Release, RenewLeases, the bindings a new inventory drops or whose lease
  ran out, PlanFleet) runs inside
  ``change``: the journal is locked, the engine first applies what other engines changed since
  the version it has seen, then decides, records and commits, so engines on one journal never
  bind the same GPU twice and number their plans in one sequence;
- ``read`` brings an engine up to date without locking (reads, WatchPlan, a restart).

A journal that cannot lock, read or commit raises ``scheduler.domain.errors.Unavailable``; the
engine then leaves its state as it was (nothing is half-applied) and the caller gets UNAVAILABLE.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from scheduler.domain.fleet_types import FleetPlan
from scheduler.domain.model import Binding


@dataclass(frozen=True, slots=True)
class JournalChanges:
    """What changed after a version. ``full``: a snapshot instead (the engine had seen nothing,
    or the journal no longer holds every release since): ``bound`` is then every binding and
    whatever the engine knows beyond it is gone."""

    version: int  # the journal's version these changes bring the engine to
    bound: tuple[Binding, ...]  # bindings made (or made again) since, still bound
    released: tuple[str, ...]  # workload ids released since
    plan: FleetPlan | None  # the current plan when it changed since (None: unchanged)
    full: bool = False


class JournalChange(Protocol):
    """One locked change: ``changes`` since the engine's version; what it records commits when
    the ``with`` block ends without an exception (``committed_version`` is then set)."""

    changes: JournalChanges
    committed_version: int | None

    def bound(self, binding: Binding) -> None: ...

    def released(self, workload_ids: Sequence[str]) -> None: ...

    def renewed(self, bindings: Sequence[Binding]) -> None:
        """Record these bound workloads' new lease expiries (nothing else of them changed)."""
        ...

    def planned(self, plan: FleetPlan) -> None: ...


class PlacementJournal(Protocol):
    def read(self, since_version: int) -> JournalChanges:
        """What changed after ``since_version`` (0: a full snapshot), without locking."""
        ...

    def change(self, since_version: int) -> AbstractContextManager[JournalChange]:
        """Lock the journal for one change (other engines' changes wait until it ends)."""
        ...
