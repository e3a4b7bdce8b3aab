"""A DecisionStore that keeps a tick report in process when saving it fails, and saves it later.

A tick applies its actions before its report is saved, and the report carries the tick's guard
memory (stabilization windows, cooldowns, disruption budgets). If that save fails, the store's
newest memory is the tick before: guards reading it would forget what the failed tick did (the
scale-up that started a cooldown, say) and allow a second step too soon. So the unsaved report is
kept; its memory is served instead of the stored one while it is newer, and the report is saved
again before the next one. Only the newest unsaved report is kept: the next tick's memory starts
from it, so once a later report is saved the older one adds only its record, which is dropped
(logged) rather than inserted after a newer tick.

It also records who wrote each report: the loop builds it with its process's identity
(``writer``: the Lease holder identity of a Kubernetes replica, the store lease holder of the
simulated fleet), stamped on every report it saves, a late save too, so ``headroom status``
names the replica that leads and sees when that changed (``domain.tick_writers``).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from controlplane.domain.guards import GuardMemory, newer_memory
from controlplane.domain.observed import ObservedState
from controlplane.domain.tick import TickReport
from controlplane.ports import DecisionStore

log = logging.getLogger("headroom.reconcile")


class RetryingDecisionStore:
    """Wraps a DecisionStore; a failed ``save_tick`` still raises, after keeping the report."""

    def __init__(self, store: DecisionStore, writer: str | None = None) -> None:
        self._store = store
        self.writer = writer  # stamped on each report that does not name its writer
        self._unsaved: TickReport | None = None

    @property
    def unsaved(self) -> TickReport | None:
        """The newest report whose save failed and has not been saved since, if any."""
        return self._unsaved

    def save_observed(self, observed: ObservedState) -> None:
        self._store.save_observed(observed)

    def last_guard_memory(self) -> GuardMemory:
        stored = self._store.last_guard_memory()
        if self._unsaved is None:
            return stored
        return newer_memory(self._unsaved.guard_memory, stored)

    def save_tick(self, report: TickReport) -> int:
        if report.writer is None and self.writer is not None:
            report = replace(report, writer=self.writer)
        self._save_unsaved()
        try:
            tick_id = self._store.save_tick(report)
        except Exception as error:
            self._keep(report, error)
            raise
        if self._unsaved is not None:
            log.warning("tick.record_dropped", extra={
                "started_at": self._unsaved.started_at.isoformat(),
                "reason": "a later tick was saved first; its guard memory carries this one's"})
            self._unsaved = None
        return tick_id

    def _keep(self, report: TickReport, error: Exception) -> None:
        if self._unsaved is not None:
            log.warning("tick.record_dropped", extra={
                "started_at": self._unsaved.started_at.isoformat(),
                "reason": "a later tick's save failed too; its guard memory is kept instead"})
        self._unsaved = report
        log.error("tick.save_failed", extra={
            "started_at": report.started_at.isoformat(), "error": str(error),
            "kept": "guard memory kept in process; the report is saved again next tick"})

    def _save_unsaved(self) -> None:
        unsaved = self._unsaved
        if unsaved is None:
            return
        try:
            stored = self._store.last_guard_memory()
            if newer_memory(unsaved.guard_memory, stored) is stored:
                log.warning("tick.record_dropped", extra={
                    "started_at": unsaved.started_at.isoformat(),
                    "reason": "the store holds a newer tick (another leader's?)"})
            else:
                self._store.save_tick(unsaved)
                log.info("tick.saved_late", extra={"started_at": unsaved.started_at.isoformat()})
        except Exception as error:  # kept for the next try; logged, not raised
            log.warning("tick.save_retry_failed", extra={
                "started_at": unsaved.started_at.isoformat(), "error": str(error)})
            return
        self._unsaved = None
