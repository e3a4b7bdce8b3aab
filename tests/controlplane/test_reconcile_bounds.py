"""Replica bounds and a pause through the whole loop: a min_replicas bound raises a model its
demand sizes lower, a paused model is held (no action but reaching the count it is held at,
its reason saying so; over its max_replicas too), a pause made while the loop runs takes
effect at the next tick, and a resumed model scales again, to its max_replicas. Real core,
simulated fleet, in-process placement, SQLite."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from controlplane.adapters.clock import WallClock
from controlplane.domain.actions import SetReplicas
from controlplane.domain.tick import TickReport
from controlplane.metrics import ControlPlaneMetrics
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.pauses import SqlModelPauses

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
WHISPER = "whisper-asr"  # about 4 replicas from its demand at this hour
LLAMA_70B = "llama-3-70b"  # about 10
RESNET = "resnet50-vision"  # about 7


def _runtime(url: str) -> tuple[SimRuntime, list[SetReplicas]]:
    settings = load_settings(db={"url": url}, sim={"history_s": 3600, "start_warm": True,
                                                   "true_throughput_factor": {}})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), T0)
    actions: list[SetReplicas] = []
    runtime.on_tick = lambda report, _saved: actions.extend(
        a for a in (report.plan.actions if report.plan else ()) if isinstance(a, SetReplicas))
    return runtime, actions


def _replicas(runtime: SimRuntime) -> dict[str, int]:
    return {m.name: m.replicas_target for m in runtime.cluster.snapshot().models}


def test_a_min_bound_raises_a_model_and_a_paused_one_is_held_until_resumed(
        sqlite_url: str) -> None:
    runtime, actions = _runtime(sqlite_url)
    runtime.advance(2 * 60)  # the fleet taken over, as sized without bounds
    before = _replicas(runtime)
    assert before[WHISPER] < 7 and before[LLAMA_70B] > 5
    actions.clear()
    bounds = {WHISPER: (7, None), LLAMA_70B: (None, 5)}  # (min_replicas, max_replicas)
    runtime.config = replace(runtime.config, models=tuple(
        replace(m, spec=replace(m.spec, min_replicas=bounds[m.spec.name][0],
                                max_replicas=bounds[m.spec.name][1]))
        if m.spec.name in bounds else m for m in runtime.config.models))
    pauses = SqlModelPauses(runtime.store.engine)
    assert pauses.pause(LLAMA_70B, None, T0, "alice")  # held at the replicas it has
    runtime.advance(5 * 60)

    replicas = _replicas(runtime)
    assert replicas[WHISPER] == 7
    raised = [a for a in actions if a.model == WHISPER]
    assert raised and all(a.reason.endswith("+min_replicas:7") for a in raised), raised
    assert replicas[LLAMA_70B] == before[LLAMA_70B]  # a pause wins over max_replicas
    assert not [a for a in actions if a.model == LLAMA_70B]

    # paused while the loop runs, at a count: the next tick scales to it and no further
    seen_resnet = replicas[RESNET]
    pauses.pause(RESNET, seen_resnet - 2, T0, "bob")
    actions.clear()
    runtime.advance(5 * 60)
    assert _replicas(runtime)[RESNET] == seen_resnet - 2
    moved = [a for a in actions if a.model == RESNET]
    assert [a.to_replicas for a in moved] == [seen_resnet - 2]
    assert moved[0].reason == "paused since 2026-01-05T09:00:00Z by bob"
    pools = {p.name: p.target_nodes for p in runtime.cluster.snapshot().pools}
    assert sum(pools.values()) > 0  # the pools still hold the held replicas' GPUs

    assert pauses.resume(LLAMA_70B) is not None
    actions.clear()
    runtime.advance(3 * 60)
    resumed = [a for a in actions if a.model == LLAMA_70B]
    assert resumed and resumed[0].reason.endswith("+max_replicas:5"), resumed
    assert _replicas(runtime)[LLAMA_70B] == 5


def test_each_deciding_ticks_report_carries_every_models_target_warm_pause_and_bounds(
        sqlite_url: str) -> None:
    runtime, _ = _runtime(sqlite_url)
    reports: list[TickReport] = []
    runtime.on_tick = lambda report, _saved: reports.append(report)
    runtime.config = replace(runtime.config, models=tuple(
        replace(m, spec=replace(m.spec, min_replicas=7, max_replicas=12))
        if m.spec.name == WHISPER else m for m in runtime.config.models))
    assert SqlModelPauses(runtime.store.engine).pause(LLAMA_70B, 3, T0, "alice")
    runtime.advance(2 * 60)

    last = reports[-1]
    assert last.plan is not None
    by_model = {r.model: r for r in last.replicas}
    assert set(by_model) == {m.spec.name for m in runtime.config.models}
    assert (by_model[WHISPER].target, by_model[WHISPER].min_replicas,
            by_model[WHISPER].max_replicas) == (7, 7, 12)
    assert (by_model[LLAMA_70B].target, by_model[LLAMA_70B].paused_at,
            by_model[LLAMA_70B].warm) == (3, T0, 0)  # held: no ladder warms it
    assert by_model[RESNET].paused_at is None and by_model[RESNET].min_replicas is None
    # the targets are the replicas the tick wanted: once reached, the workloads' own
    assert {m: r.target for m, r in by_model.items()} == _replicas(runtime)


def test_a_model_paused_at_more_replicas_than_its_pools_hold_keeps_serving_on_all_they_hold(
        sqlite_url: str) -> None:
    runtime, _ = _runtime(sqlite_url)
    runtime.advance(2 * 60)
    h100 = next(p for p in runtime.settings.pools if p.product == "H100-80GB")
    most = h100.max_nodes * h100.gpus_per_node  # llama-3-70b takes a whole H100 a replica
    assert SqlModelPauses(runtime.store.engine).pause(LLAMA_70B, most + 10, T0, "alice")
    runtime.advance(10 * 60)

    seen = runtime.cluster.snapshot()
    llama = next(m for m in seen.models if m.name == LLAMA_70B)
    assert llama.replicas_target == most + 10  # the workload is held at the pause's count
    assert llama.replicas_ready == most  # and serves on every GPU its pool can hold
    assert next(p for p in seen.pools if p.name == h100.name).target_nodes == h100.max_nodes


def test_a_pause_just_made_on_a_store_clock_days_behind_exports_a_start_seconds_before_now(
        sqlite_url: str) -> None:
    """A demo started 3 days in the past: headroom_model_paused_since_timestamp_seconds was the
    pause's start on the simulated clock, and HeadroomModelPaused (time() - it > 1 day) fired
    seconds after the pause. It is now less the pause's age on the store's clock."""
    start_at = (WallClock().now() - timedelta(days=3)).replace(second=0, microsecond=0)
    settings = load_settings(db={"url": sqlite_url}, sim={"history_s": 3600})
    runtime = SimRuntime.open(settings, Store.open(sqlite_url, migrate=True), start_at)
    registry = CollectorRegistry()
    runtime.on_tick = ControlPlaneMetrics(registry).record
    runtime.advance(60)
    assert SqlModelPauses(runtime.store.engine).pause(WHISPER, 2, runtime.clock.now(), "alice")
    runtime.advance(30)  # the next tick, at most 30 s on the store's clock after the pause

    since_s = registry.get_sample_value("headroom_model_paused_since_timestamp_seconds",
                                        {"model": WHISPER})
    assert since_s is not None
    assert 0 <= time.time() - since_s <= 30 + 5
