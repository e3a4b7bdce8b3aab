"""A loop's tick as ``run_tick`` runs it: an unexpected error fails the tick (counted, logged
once with its traceback) instead of escaping into the scheduler uncounted, and the tick's
seconds are wall seconds, also on the simulator's virtual clock that stands still while a tick
runs."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from controlplane.domain.demand import Demand
from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedState
from controlplane.domain.placement import FleetPlacement, WarmGpus
from controlplane.domain.tick import TickStatus
from controlplane.metrics import ControlPlaneMetrics
from controlplane.ports import PlacementClient
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store

T0 = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
SLEEP_S = 0.05


class CrashingPlacement:
    """The runtime's placement client whose next ``crashes`` PlanFleet calls raise, as a solver
    bug would; each call sleeps ``sleep_s`` first (a slow solve)."""

    def __init__(self, inner: PlacementClient, crashes: int = 0, sleep_s: float = 0.0) -> None:
        self.inner = inner
        self.crashes = crashes
        self.sleep_s = sleep_s

    def sync_inventory(self, observed: ObservedState) -> None:
        self.inner.sync_inventory(observed)

    def plan_fleet(self, demands: Sequence[Demand], specs: Sequence[ModelSpec],
                   pools: Sequence[PoolSpec],
                   warm: Sequence[WarmGpus] | None = None) -> FleetPlacement:
        time.sleep(self.sleep_s)
        if self.crashes > 0:
            self.crashes -= 1
            raise RuntimeError("solver crashed")
        return self.inner.plan_fleet(demands, specs, pools, warm)


def _metered_runtime(url: str) -> tuple[SimRuntime, CollectorRegistry]:
    """A started SimRuntime (its first tick ran) whose ticks a registry counts from now on."""
    settings = load_settings(db={"url": url}, sim={"history_s": 3600})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), T0)
    runtime.start()
    registry = CollectorRegistry()
    runtime.on_tick = ControlPlaneMetrics(registry).record
    return runtime, registry


def _ticks(registry: CollectorRegistry, status: TickStatus) -> float | None:
    return registry.get_sample_value("headroom_reconcile_ticks_total", {"status": status.value})


def test_a_tick_that_raises_is_counted_failed_and_the_next_good_tick_applies(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime, registry = _metered_runtime(sqlite_url)
    placement = CrashingPlacement(runtime.deps.placement, crashes=3)
    runtime.deps = replace(runtime.deps, placement=placement)
    ticks_before = runtime.store.counts()["ticks"]
    with caplog.at_level(logging.ERROR, logger="headroom.reconcile"):
        runtime.advance(90)  # three ticks, each of which raises in PlanFleet
    assert _ticks(registry, TickStatus.FAILED) == 3.0
    assert _ticks(registry, TickStatus.APPLIED) == 0  # exported at 0 from the start
    failed = [r for r in caplog.records if r.getMessage() == "tick.failed"]
    assert [(r.__dict__["reason"], r.__dict__["error"]) for r in failed] == [
        ("error", "RuntimeError: solver crashed")] * 3
    assert all(r.exc_info is not None and r.exc_info[0] is RuntimeError for r in failed)
    assert runtime.store.counts()["ticks"] == ticks_before  # counted, not recorded

    report = runtime.tick()  # the solver answers again: the loop goes on
    assert report.status is TickStatus.APPLIED and report.plan is not None
    assert _ticks(registry, TickStatus.APPLIED) == 1.0
    assert runtime.store.counts()["ticks"] == ticks_before + 1


def test_a_failed_tick_report_names_the_error_and_holds_no_guard_memory(
        sqlite_url: str) -> None:
    runtime, _ = _metered_runtime(sqlite_url)
    placement = CrashingPlacement(runtime.deps.placement, crashes=1)
    runtime.deps = replace(runtime.deps, placement=placement)
    runtime.clock.advance(30)
    report = runtime.tick()
    assert (report.status, report.reason) == (TickStatus.FAILED, "error")
    assert report.observed.notes == ("RuntimeError: solver crashed",)
    assert report.plan is None and report.guard_memory.newest_at is None


def test_a_simulated_ticks_seconds_are_the_wall_seconds_it_took(sqlite_url: str) -> None:
    runtime, registry = _metered_runtime(sqlite_url)
    placement = CrashingPlacement(runtime.deps.placement, sleep_s=SLEEP_S)
    runtime.deps = replace(runtime.deps, placement=placement)
    runtime.clock.advance(30)
    report = runtime.tick()
    assert report.status is TickStatus.APPLIED
    assert report.finished_at == report.started_at  # the virtual clock stood still
    assert report.duration_s is not None and report.duration_s >= SLEEP_S
    seconds = registry.get_sample_value("headroom_reconcile_tick_seconds_sum")
    assert seconds is not None and seconds >= SLEEP_S
