"""The reconcile tick end to end: real core, simulated fleet, in-process placement, SQLite store."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from controlplane.domain.errors import PermanentError, TransientError
from controlplane.domain.observed import ObservedState
from controlplane.domain.tick import TickStatus
from controlplane.reconcile import (
    SNAPSHOT_STALE,
    SOURCE_REJECTED,
    SOURCE_UNREACHABLE,
    reconcile_once,
)
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class UnreachableReader:
    def snapshot(self) -> ObservedState:
        raise TransientError("apiserver: connection refused")


class ForbiddenReader:
    def snapshot(self) -> ObservedState:
        raise PermanentError("HTTP 403: nodes is forbidden")


class WithoutWorkloadOf:
    """The simulated fleet as a cluster would show it once a model's workload was deleted."""

    def __init__(self, runtime: SimRuntime, model: str) -> None:
        self.runtime, self.model = runtime, model

    def snapshot(self) -> ObservedState:
        seen = self.runtime.cluster.snapshot()
        return replace(seen, models=tuple(m for m in seen.models if m.name != self.model))


class RatesSampledAgo:
    """The simulated fleet listed now, its request rates resting on samples ``age_s`` old."""

    def __init__(self, runtime: SimRuntime, age_s: float) -> None:
        self.runtime, self.age_s = runtime, age_s

    def snapshot(self) -> ObservedState:
        seen = self.runtime.cluster.snapshot()
        return replace(seen, data_at=seen.synced_at - timedelta(seconds=self.age_s))


def _runtime(url: str, dry_run: bool = False, start_warm: bool = False) -> SimRuntime:
    """A runtime on a new store; by default on empty pools, so every tick is the loop's own.
    Its replicas serve what their profiles say (no true throughput factor): what a taken-over
    fleet serves from the first minute does not wait for a profile correction."""
    settings = load_settings(db={"url": url}, safety={"dry_run": dry_run},
                             sim={"history_s": 6 * 3600, "start_warm": start_warm,
                                  "true_throughput_factor": {}})
    return SimRuntime.open(settings, Store.open(url, migrate=True), T0)


def _served_share_of_first_minutes(runtime: SimRuntime, minutes: int) -> float:
    runtime.advance(minutes * 60)
    return runtime.tally.served_share


def test_a_new_fleet_taken_over_serves_the_demand_from_its_first_minute(
        sqlite_url: str) -> None:
    runtime = _runtime(sqlite_url, start_warm=True)
    assert runtime.cluster.snapshot().gpus_ready() == 0
    runtime.start()
    assert runtime.store.counts()["ticks"] == 1  # the sizing of the running fleet is unrecorded
    first_seen = runtime.store.last_observed()  # what the first recorded tick found
    assert first_seen is not None and first_seen.gpus_ready() > 0
    assert all(m.capacity_rps >= m.demand_rps for m in first_seen.models)
    assert _served_share_of_first_minutes(runtime, 3) > 0.99


def test_a_fleet_started_on_empty_pools_waits_for_its_nodes(sqlite_url: str) -> None:
    runtime = _runtime(sqlite_url)
    assert runtime.cluster.snapshot().gpus_ready() == 0
    assert _served_share_of_first_minutes(runtime, 3) < 0.9


def test_a_simulated_hour_from_empty_pools_serves_the_demand_and_records_every_tick(
        sqlite_url: str) -> None:
    """An hour holds the whole climb from empty pools (the fleet is up within half an hour; the
    demand stays near 1,500 rps through the morning, so later hours add only steady ticks) and
    the share served counts that climb against one hour, not three."""
    runtime = _runtime(sqlite_url)
    runtime.advance(3600)
    counts = runtime.store.counts()
    assert counts["ticks"] == runtime.ticks == 3600 // 30 + 1  # at 0, 30 s, ..., 1 h
    assert counts["plans"] == counts["ticks"] and counts["placements"] > 0
    assert runtime.tally.served_share > 0.95
    assert runtime.cluster.snapshot().gpus_ready() > 0


def test_a_second_tick_on_an_unchanged_world_plans_nothing(sqlite_url: str) -> None:
    runtime = _runtime(sqlite_url)
    runtime.advance(3600)
    first = runtime.tick()
    second = runtime.tick()
    assert first.plan is not None and second.plan is not None
    assert second.plan.is_noop, second.plan.render()


def test_dry_run_records_plans_but_leaves_the_fleet_untouched(sqlite_url: str) -> None:
    runtime = _runtime(sqlite_url, dry_run=True)
    report = runtime.tick()
    assert report.status is TickStatus.DRY_RUN and report.plan is not None
    assert report.plan.actions and not report.outcomes
    assert runtime.cluster.snapshot().gpus_ready() == 0
    assert runtime.store.counts()["plans"] == 1


def test_an_unreachable_cluster_skips_the_tick_with_a_reason(sqlite_url: str) -> None:
    runtime = _runtime(sqlite_url)
    deps = replace(runtime.deps, reader=UnreachableReader())
    report = reconcile_once(deps, runtime.config)
    assert report.status is TickStatus.SKIPPED and report.reason == SOURCE_UNREACHABLE
    assert runtime.store.counts()["ticks"] == 1 and runtime.store.counts()["plans"] == 0


def test_a_forbidden_read_records_a_failed_tick_naming_the_api_error(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime = _runtime(sqlite_url)
    deps = replace(runtime.deps, reader=ForbiddenReader())
    with caplog.at_level(logging.INFO, logger="headroom.reconcile"):
        first = reconcile_once(deps, runtime.config)
        second = reconcile_once(deps, runtime.config)
    for report in (first, second):
        assert report.status is TickStatus.FAILED and report.reason == SOURCE_REJECTED
        assert report.observed.notes == ("HTTP 403: nodes is forbidden",)
        assert report.plan is None and report.outcomes == ()
    assert runtime.store.counts()["ticks"] == 2 and runtime.store.counts()["plans"] == 0
    failed = [r for r in caplog.records if r.getMessage() == "tick.failed"]
    assert [(r.levelname, r.__dict__["error"], r.exc_info) for r in failed] == [
        ("ERROR", "HTTP 403: nodes is forbidden", None)] * 2


def test_an_unreachable_cluster_is_logged_as_a_warning_naming_the_error(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime = _runtime(sqlite_url)
    deps = replace(runtime.deps, reader=UnreachableReader())
    with caplog.at_level(logging.INFO, logger="headroom.reconcile"):
        reconcile_once(deps, runtime.config)
    skipped = [r for r in caplog.records if r.getMessage() == "tick.skipped"]
    assert [(r.levelname, r.__dict__["error"]) for r in skipped] == [
        ("WARNING", "apiserver: connection refused")]


def test_a_configured_model_no_workload_serves_is_noted_in_the_ticks_record(
        sqlite_url: str) -> None:
    runtime = _runtime(sqlite_url)
    gone = runtime.config.specs[0].name
    report = reconcile_once(replace(runtime.deps, reader=WithoutWorkloadOf(runtime, gone)),
                            runtime.config)
    note = (f"model {gone}: no workload serves it (no Deployment or StatefulSet labelled with "
            "it); its load is not read and its replicas cannot be set")
    assert report.status is TickStatus.APPLIED and report.observed.notes == (note,)
    saved = runtime.store.last_observed()
    assert saved is not None and saved.notes == (note,)
    assert runtime.tick().observed.notes == ()  # every model served: nothing to say


def test_a_snapshot_listed_now_on_rates_ten_minutes_old_skips_the_tick_as_stale(
        sqlite_url: str) -> None:
    runtime = _runtime(sqlite_url)
    stale = reconcile_once(replace(runtime.deps, reader=RatesSampledAgo(runtime, 600)),
                           runtime.config)
    assert (stale.status, stale.reason, stale.plan) == (TickStatus.SKIPPED, SNAPSHOT_STALE, None)
    fresh = reconcile_once(replace(runtime.deps, reader=RatesSampledAgo(runtime, 15)),
                           runtime.config)
    assert fresh.status is TickStatus.APPLIED
