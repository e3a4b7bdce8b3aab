"""The fleet's pause through the whole loop: while `headroom fleet pause` holds, every tick
still observes, sizes and plans, and records its plan as a dry run whose reason names the
pause, but no replica or node pool changes; the pause's start is exported for
HeadroomFleetPaused; after `headroom fleet resume` the next tick applies what it plans. Real
core, simulated fleet, in-process placement, SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry

from controlplane.domain.actions import SetReplicas
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.metrics import ControlPlaneMetrics
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.fleet_pause import SqlFleetPause
from controlplane.store.status_reader import read_fleet_status

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
WHISPER = "whisper-asr"  # about 4 replicas from its demand at this hour


def _fleet(runtime: SimRuntime) -> tuple[dict[str, int], dict[str, int]]:
    """Each model's replica target and each pool's node target, as the fleet has them."""
    seen = runtime.cluster.snapshot()
    return ({m.name: m.replicas_target for m in seen.models},
            {p.name: p.target_nodes for p in seen.pools})


def test_a_paused_fleets_ticks_plan_a_dry_run_and_change_nothing_until_it_is_resumed(
        store_url: str) -> None:
    settings = load_settings(db={"url": store_url}, sim={"history_s": 3600, "start_warm": True,
                                                         "true_throughput_factor": {}})
    runtime = SimRuntime.open(settings, Store.open(store_url, migrate=True), T0)
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    reports: list[TickReport] = []

    def on_tick(report: TickReport, saved: bool) -> None:
        reports.append(report)
        metrics.record(report, saved)

    runtime.on_tick = on_tick
    runtime.advance(2 * 60)  # the fleet taken over
    assert _fleet(runtime)[0][WHISPER] < 7
    pause = SqlFleetPause(runtime.store.engine)
    assert pause.pause(T0, "alice", "incident 4711").earlier is None
    # a change the loop would make at once: whisper's replicas raised to a bound of 7
    runtime.config = replace(runtime.config, models=tuple(
        replace(m, spec=replace(m.spec, min_replicas=7)) if m.spec.name == WHISPER else m
        for m in runtime.config.models))
    before = _fleet(runtime)
    reports.clear()
    runtime.advance(5 * 60)

    assert _fleet(runtime) == before
    deciding = [r for r in reports if r.plan is not None]
    assert len(deciding) == 10
    assert {(r.status, r.reason, r.outcomes) for r in deciding} == {
        (TickStatus.DRY_RUN, "fleet_paused since 2026-01-05T09:00:00Z by alice: incident 4711",
         ())}
    planned = [a for r in deciding if r.plan is not None for a in r.plan.actions
               if isinstance(a, SetReplicas) and a.model == WHISPER]
    assert planned and {a.to_replicas for a in planned} == {7}  # planned, each tick
    status = read_fleet_status(runtime.store.engine, "store", "sim-fleet")
    assert status.last_tick is not None and status.last_tick.status == "dry_run"
    assert status.fleet_pause is not None and status.fleet_pause.why == "incident 4711"
    assert registry.get_sample_value("headroom_fleet_paused_since_timestamp_seconds",
                                     {"paused_by": "alice"}) is not None

    assert pause.resume() is not None
    reports.clear()
    runtime.advance(2 * 60)
    assert _fleet(runtime)[0][WHISPER] == 7
    assert {r.status for r in reports if r.plan is not None} == {TickStatus.APPLIED}
    assert registry.get_sample_value("headroom_fleet_paused_since_timestamp_seconds",
                                     {"paused_by": "alice"}) is None
