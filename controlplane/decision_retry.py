"""A DecisionStore that keeps a tick report in process when saving it fails, and saves it later.

A tick applies its actions before its report is saved, and the report carries the tick's guard
memory (stabilization windows, cooldowns, disruption budgets). If that save fails, the store's
newest memory is the tick before: guards reading it would forget what the failed tick did (the
scale-up that started a cooldown, say) and allow a second step too soon. So the unsaved report is
kept; its memory is served instead of the stored one while it is newer, and the report is saved
again before the next one. Only the newest unsaved report is kept: the next tick's memory starts
from it, so once a later report is saved the older one adds only its record, which is dropped
(logged) rather than inserted after a newer tick. (A process killed before the save keeps
nothing in process: then the intent the tick saved before acting, ``store.guard_intent``, is the
store's newest memory. This process's own intent does not count as a newer tick when an
unsaved report is saved late.)

It also records who wrote each report: the loop builds it with its process's identity
(``writer``: the Lease holder identity of a Kubernetes replica, the store lease holder of the
simulated fleet), stamped on every report it saves, a late save too, so ``headroom status``
names the replica that leads and sees when that changed (``domain.tick_writers``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from controlplane.domain.errors import Fenced
from controlplane.domain.guards import GuardMemory, newer_memory
from controlplane.domain.observed import ObservedState
from controlplane.domain.tick import TickReport
from controlplane.ports import DecisionStore

log = logging.getLogger("headroom.reconcile")


class RetryingDecisionStore:
    """Wraps a DecisionStore; a failed ``save_tick`` still raises, after keeping the report."""

    def __init__(self, store: DecisionStore, writer: str | None = None,
                 term: Callable[[], int | None] | None = None) -> None:
        """``term``: the leadership term this process holds (``LeaderElector.term``); each new
        one claims the next fencing token before its first save, and every save is fenced by
        it (``store/tick_fence.py``). None, or a term of None: unfenced."""
        self._store = store
        self.writer = writer  # stamped on each report that does not name its writer
        self._term_of = term
        self._term: int | None = None  # the term the token was claimed for
        self._token: int | None = None
        self._claiming = threading.Lock()
        self._unsaved: TickReport | None = None
        self._intent_at: datetime | None = None  # when this process's newest intent was saved

    @property
    def unsaved(self) -> TickReport | None:
        """The newest report whose save failed and has not been saved since, if any."""
        return self._unsaved

    def save_observed(self, observed: ObservedState, fence: int | None = None) -> None:
        """Raises ``Fenced`` (the tick must not act) when another term claimed the store."""
        fence = self.fence_token(observed.synced_at) if fence is None else fence
        self._store.save_observed(observed, fence=fence)

    def claim_fence(self, holder: str, now: datetime) -> int:
        return self._store.claim_fence(holder, now)

    def fence_token(self, now: datetime) -> int | None:
        """The token of the term this process holds now, claimed at its first save (or the
        first fenced save of another record, e.g. a MIG re-layout's); None: unfenced."""
        term = None if self._term_of is None else self._term_of()
        if term is None:
            return None
        with self._claiming:  # one claim per term: two would fence each other off
            if term != self._term or self._token is None:
                self._token = self._store.claim_fence(self.writer or "unknown", now)
                self._term = term
                log.info("tick.fence_claimed", extra={"token": self._token,
                                                      "writer": self.writer or "unknown"})
            return self._token

    def save_intent(self, started_at: datetime, memory: GuardMemory,
                    writer: str | None = None, fence: int | None = None) -> None:
        """Raises ``Fenced`` (the tick must not act) when another term claimed the store."""
        fence = self.fence_token(started_at) if fence is None else fence
        self._store.save_intent(started_at, memory, writer or self.writer, fence=fence)
        self._intent_at = started_at

    def last_guard_memory(self) -> GuardMemory:
        stored = self._store.last_guard_memory()
        if self._unsaved is None:
            return stored
        return newer_memory(self._unsaved.guard_memory, stored)

    def save_tick(self, report: TickReport, fence: int | None = None) -> int:
        """A fenced report (``RecordFenced``) is dropped, not kept: another term leads."""
        if report.writer is None and self.writer is not None:
            report = replace(report, writer=self.writer)
        try:
            fence = self.fence_token(report.started_at) if fence is None else fence
            self._save_unsaved(fence)
            tick_id = self._store.save_tick(report, fence=fence)
        except Fenced as error:
            log.error("tick.record_fenced", extra={
                "started_at": report.started_at.isoformat(), "error": str(error),
                "dropped": "another replica leads the store's records now"})
            raise RecordFenced(report, error) from error
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

    def _save_unsaved(self, fence: int | None) -> None:
        unsaved = self._unsaved
        if unsaved is None:
            return
        try:
            stored = self._store.last_guard_memory()
            # newer than the unsaved record: another leader's tick, or this process's own
            # intent (saved before the tick that now saves acted), which does not count
            own_intent = stored.newest_at is not None and stored.newest_at == self._intent_at
            if newer_memory(unsaved.guard_memory, stored) is stored and not own_intent:
                log.warning("tick.record_dropped", extra={
                    "started_at": unsaved.started_at.isoformat(),
                    "reason": "the store holds a newer tick (another leader's?)"})
            else:
                self._store.save_tick(unsaved, fence=fence)
                log.info("tick.saved_late", extra={"started_at": unsaved.started_at.isoformat()})
        except Fenced as error:  # another term leads: this record must not be the newest
            log.warning("tick.record_dropped", extra={
                "started_at": unsaved.started_at.isoformat(), "reason": str(error)})
        except Exception as error:  # kept for the next try; logged, not raised
            log.warning("tick.save_retry_failed", extra={
                "started_at": unsaved.started_at.isoformat(), "error": str(error)})
            return
        self._unsaved = None


class RecordFenced(Fenced):
    """A tick report (``report``) whose save was fenced off: dropped, never retried."""

    def __init__(self, report: TickReport, error: Fenced) -> None:
        super().__init__(error.token, error.newest, error.holder)
        self.report = report
