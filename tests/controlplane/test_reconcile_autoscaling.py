"""The reconcile loop (demo, serve) sizes replicas and warm pools through the autoscaling core:
hot replicas from the policy's demand, warm GPUs from the warm-pool ladder, before a rise."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

from controlplane.autoscaling.core import Budgets
from controlplane.autoscaling.sizing import WARM_POOL_LADDER
from controlplane.domain.actions import SetReplicas
from controlplane.domain.demand import replicas_for
from controlplane.domain.tick import TickReport
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
MODEL = "llama-3-70b"  # whole H100s, 12 rps per replica, the only model on the H100 pool
PER_REPLICA_RPS = 12.0
TARGET_UTILIZATION = 0.8  # reconcile.target_utilization default


class RiseAhead:
    """A forecast of MODEL: flat at ``level_rps`` until ``rise_after_s``, then ``factor`` x."""

    def __init__(self, now: datetime, level_rps: float, rise_after_s: int, factor: float) -> None:
        values = tuple(level_rps * (factor if i * 60 >= rise_after_s else 1.0) for i in range(20))
        self.forecast = Forecast(MODEL, now, 60, values, values, "test")

    def latest_forecasts(self) -> Mapping[str, Forecast]:
        return {MODEL: self.forecast}


def _settled_runtime(url: str) -> SimRuntime:
    settings = load_settings(db={"url": url}, sim={"history_s": 6 * 3600})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), T0)
    runtime.advance(15 * 60)
    return runtime


def _with_forecast(runtime: SimRuntime, rise_after_s: int) -> float:
    """Replace the stored forecasts by a rise of MODEL; returns its load now."""
    seen = runtime.cluster.snapshot().model(MODEL)
    assert seen is not None
    runtime.deps = replace(runtime.deps, forecasts=RiseAhead(runtime.clock.now(), seen.demand_rps,
                                                             rise_after_s, factor=3.0))
    return seen.demand_rps


def _replicas(rps: float) -> int:
    return replicas_for(rps / TARGET_UTILIZATION, PER_REPLICA_RPS)


def test_warm_gpus_from_the_ladder_are_held_before_a_rise_the_hot_replicas_do_not_cover_yet(
        sqlite_url: str) -> None:
    runtime = _settled_runtime(sqlite_url)
    level = _with_forecast(runtime, rise_after_s=300)
    report = runtime.tick()
    assert report.placement is not None
    hot, risen = _replicas(level), _replicas(3 * level)
    assert risen > hot
    assert report.placement.replicas_for(MODEL) == hot
    warm = [w for w in report.placement.warm_pools if w.product == "H100-80GB"]
    assert [(w.gpus, w.reason) for w in warm] == [(risen - hot, WARM_POOL_LADDER)]


def test_replicas_rise_before_the_load_when_the_rise_is_within_the_hot_window(
        sqlite_url: str) -> None:
    runtime = _settled_runtime(sqlite_url)
    level = _with_forecast(runtime, rise_after_s=60)
    report = runtime.tick()
    assert report.plan is not None
    seen = runtime.cluster.snapshot().model(MODEL)
    assert seen is not None and seen.demand_rps < 1.5 * level
    raised = [a for a in report.plan.actions if isinstance(a, SetReplicas) and a.model == MODEL]
    assert [a.to_replicas for a in raised] == [_replicas(3 * level)]


def test_replicas_a_tenant_budget_cuts_are_set_with_the_budget_as_their_reason(
        sqlite_url: str) -> None:
    runtime = _settled_runtime(sqlite_url)  # initech runs 4 + 2 replicas of one GPU or less
    runtime.config = replace(runtime.config, budgets=Budgets((("initech", 2.0),), None))
    reports: list[TickReport] = []
    runtime.on_tick = lambda report, saved: reports.append(report)
    runtime.advance(120)  # past the replicas' scale-down stabilization window
    cuts = {(a.model, a.to_replicas, a.reason) for r in reports if r.plan is not None
            for a in r.plan.actions if isinstance(a, SetReplicas)
            and a.model in {MODEL, "whisper-asr"}}
    assert cuts == {(MODEL, 1, "tenant_gpu_budget:initech"),
                    ("whisper-asr", 1, "tenant_gpu_budget:initech")}
