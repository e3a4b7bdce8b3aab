"""One reconcile tick for a loop that must keep going when the tick's record cannot be saved.

A tick applies its actions before its report is saved. When that save fails (a locked or lost
database), ``RetryingDecisionStore`` keeps the report in process and saves it again before the
next one, and ``reconcile_once`` raises. The loop's duties do not stop there: the tick still
counts in the metrics (as unsaved), and the node re-layouts in flight still advance. So the
loops of ``headroom serve`` (simulated and Kubernetes) and ``headroom demo`` run ticks through
``run_tick``: a save failure of this tick returns its report with ``saved`` False (the store
already logged ``tick.save_failed``). A store that cannot be used while the tick decides (a
PostgreSQL outage, a terminated connection: ``controlplane.store.outage``) fails the tick before
it acts: one ``tick.failed`` line naming the error, a failed report (reason
``store_unavailable``) the loop counts but cannot save, and the next tick tries again. Any other
error in the tick (a bug in deciding or applying, a solver that crashed) fails it too: the
``tick.failed`` line carries the traceback, the failed report (reason ``error``, its note naming
the error's type and message) is counted (``headroom_reconcile_ticks_total{status="failed"}``,
what ``HeadroomReconcileFailing`` alerts on) and not saved (its guard memory is empty; the intent
an applying tick saved before acting holds what it may have changed), and the next tick
recomputes from the fleet. A save the store fences off (another leadership term claimed it:
``store/tick_fence.py``) is not retried: a refused observation, forecast-calibration ledger
write or intent fails the tick before it acts (reason ``fenced``), a refused record returns the
report unsaved and drops it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from controlplane.decision_retry import RecordFenced, RetryingDecisionStore
from controlplane.domain.errors import Fenced, error_line
from controlplane.domain.guards import GuardMemory
from controlplane.domain.observed import ObservedState
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.reconcile import ReconcileConfig, ReconcileDeps, reconcile_once, timed
from controlplane.store.outage import STORE_DOWN

log = logging.getLogger("headroom.reconcile")
STORE_UNAVAILABLE = "store_unavailable"
FENCED = "fenced"
TICK_ERROR = "error"


@dataclass(frozen=True, slots=True)
class TickRun:
    report: TickReport
    # False: the tick acted, its record is kept in process and saved next tick (a tick the
    # store's outage failed before it acted has nothing to keep: True, status failed)
    saved: bool


def run_tick(deps: ReconcileDeps, config: ReconcileConfig) -> TickRun:
    """``reconcile_once``; a failure to save this tick's report returns it unsaved, a store
    that cannot be used before then fails the tick (nothing applied, nothing to save), and so
    does any other error of the tick (logged with its traceback; with a ``DecisionStore``
    that keeps no failed save, which cannot tell a save's failure after acting, it raises)."""
    decisions = deps.decisions
    kept_before = decisions.unsaved if isinstance(decisions, RetryingDecisionStore) else None
    began_s = time.perf_counter()
    started_at = deps.clock.now()
    try:
        return TickRun(reconcile_once(deps, config), saved=True)
    except RecordFenced as fenced:  # acted (or skipped), then found another term leads
        return TickRun(fenced.report, saved=False)
    except Fenced as fenced:  # the observation, a ledger write or the intent: nothing applied
        return TickRun(timed(not_leading(started_at, deps.clock.now(), fenced), began_s),
                       saved=True)
    except Exception as error:
        if not isinstance(decisions, RetryingDecisionStore):
            raise  # without a store that keeps a failed save: maybe a save after acting
        kept = decisions.unsaved
        if kept is not None and kept is not kept_before:  # this tick's save failed
            return TickRun(kept, saved=False)
        failed = (store_failed if isinstance(error, STORE_DOWN) else tick_error)(
            started_at, deps.clock.now(), error)
        return TickRun(timed(failed, began_s), saved=True)


def not_leading(started_at: datetime, now: datetime, fenced: Fenced) -> TickReport:
    """The report of a tick whose observation, forecast-calibration ledger write or intent the
    store fenced off before it acted (another term claimed the store since this process took
    its lease), logged on one line; never saved."""
    return _failed(started_at, now, FENCED, fenced,
                   "nothing applied; this process no longer leads")


def store_failed(started_at: datetime, now: datetime, error: Exception) -> TickReport:
    """The report of a tick the store failed before it acted, logged on one line. Its guard
    memory is empty: the report is counted, never saved (the store's newest memory stands)."""
    return _failed(started_at, now, STORE_UNAVAILABLE, error,
                   "nothing applied; the next tick tries again")


def tick_error(started_at: datetime, now: datetime, error: Exception) -> TickReport:
    """The report of a tick an unexpected error ended (in deciding, or while applying: some
    actions may have been made), logged once with its traceback; its note names the error's
    type and message. Counted, never saved, as a store outage's."""
    return _failed(started_at, now, TICK_ERROR, error, "the next tick recomputes from the fleet",
                   line=_typed_line(error), traceback=True)


def _typed_line(error: Exception) -> str:
    """``RuntimeError: solver crashed``: the error's type and the first line of its message."""
    name, text = type(error).__name__, error_line(error)
    return text if text == name else f"{name}: {text}"


def _failed(started_at: datetime, now: datetime, reason: str, error: Exception, next_step: str,
            *, line: str | None = None, traceback: bool = False) -> TickReport:
    line = error_line(error) if line is None else line
    log.error("tick.failed", extra={"reason": reason, "error": line, "next": next_step},
              exc_info=error if traceback else None)
    unobserved = ObservedState(started_at, (), (), (), synced=False, notes=(line,))
    return TickReport(started_at, now, TickStatus.FAILED, reason, unobserved, (), None, None,
                      (), GuardMemory())
