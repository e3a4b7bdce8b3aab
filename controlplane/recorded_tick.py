"""One reconcile tick for a loop that must keep going when the tick's record cannot be saved.

A tick applies its actions before its report is saved. When that save fails (a locked or lost
database), ``RetryingDecisionStore`` keeps the report in process and saves it again before the
next one, and ``reconcile_once`` raises. The loop's duties do not stop there: the tick still
counts in the metrics (as unsaved), and the node re-layouts in flight still advance. So the
loops of ``headroom serve`` (simulated and Kubernetes) and ``headroom demo`` run ticks through
``run_tick``: a save failure of this tick returns its report with ``saved`` False (the store
already logged ``tick.save_failed``); any other error raises as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.decision_retry import RetryingDecisionStore
from controlplane.domain.tick import TickReport
from controlplane.reconcile import ReconcileConfig, ReconcileDeps, reconcile_once


@dataclass(frozen=True, slots=True)
class TickRun:
    report: TickReport
    saved: bool  # False: the tick acted, its record is kept in process and saved next tick


def run_tick(deps: ReconcileDeps, config: ReconcileConfig) -> TickRun:
    """``reconcile_once``; a failure to save this tick's report returns it unsaved."""
    decisions = deps.decisions
    kept_before = decisions.unsaved if isinstance(decisions, RetryingDecisionStore) else None
    try:
        return TickRun(reconcile_once(deps, config), saved=True)
    except Exception:
        kept = decisions.unsaved if isinstance(decisions, RetryingDecisionStore) else None
        if kept is None or kept is kept_before:  # not this tick's save: a real error
            raise
        return TickRun(kept, saved=False)
