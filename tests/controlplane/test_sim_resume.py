"""A simulated fleet resumed from its store is the fleet its last tick left: the tick's record
observed the fleet before it acted, so the replica and node pool changes it applied are laid
over that observation (``store.resumed_state``) and the resumed loop does not make them again.
Real core, simulated fleet, in-process placement, SQLite."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controlplane.domain.observed import ObservedModel, ObservedPool, ObservedState
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.resumed_state import with_applied

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
LLAMA = "llama-3-8b-chat"  # about 14 replicas from its demand at this hour


def _open(url: str) -> SimRuntime:
    settings = load_settings(db={"url": url}, sim={"history_s": 3600, "start_warm": True,
                                                   "true_throughput_factor": {}})
    return SimRuntime.open(settings, Store.open(url, migrate=True), T0)


def _targets(runtime: SimRuntime) -> dict[str, int]:
    return {m.name: m.replicas_target for m in runtime.cluster.snapshot().models}


def test_a_resumed_run_keeps_the_replica_change_its_last_tick_applied(sqlite_url: str) -> None:
    first = _open(sqlite_url)
    first.advance(2 * 60)
    raised = _targets(first)[LLAMA] + 2
    llama = next(s for s in DEMO_MODELS if s.name == LLAMA)
    first.store.upsert_models([replace(llama, min_replicas=raised)])
    report = first.tick()  # its observation was taken before it acted
    assert report.observed.model(LLAMA).replicas_target < raised  # type: ignore[union-attr]
    assert _targets(first)[LLAMA] == raised
    first.store.engine.dispose()

    resumed = _open(sqlite_url)
    assert resumed.clock.now() == report.started_at + timedelta(
        seconds=first.settings.reconcile.interval_s)  # it resumed after that tick
    assert _targets(resumed)[LLAMA] == raised
    again = resumed.tick()
    assert again.observed.model(LLAMA).replicas_target == raised  # type: ignore[union-attr]
    assert again.plan is not None
    assert not [a for a in again.plan.actions if a.target == LLAMA]


def test_applied_targets_replace_the_observed_ones_and_leave_the_others() -> None:
    observed = ObservedState(
        synced_at=T0, pools=(ObservedPool("a100", "A100-80GB", 8, 2, 0, 2),
                             ObservedPool("l4", "L4", 4, 1, 0, 1)),
        nodes=(), models=(ObservedModel("a", 3, 0, 3, 10.0, 30.0),
                          ObservedModel("b", 1, 0, 1, 5.0, 10.0)))
    resumed = with_applied(observed, {"a": 5, "gone": 2}, {"l4": 3})
    assert [(m.name, m.replicas_target) for m in resumed.models] == [("a", 5), ("b", 1)]
    assert [(p.name, p.target_nodes) for p in resumed.pools] == [("a100", 2), ("l4", 3)]
