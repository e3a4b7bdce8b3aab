"""The reconcile loop's Prometheus metrics, read back from their registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from tick_builders import sample_tick_report

from controlplane.domain.actions import ActionOutcome, SkippedAction
from controlplane.domain.demand import Demand
from controlplane.domain.desired import PoolSpec
from controlplane.domain.forecast_accuracy import ForecastAccuracy
from controlplane.domain.loading_guard import GuardChange, GuardSync
from controlplane.domain.model_replicas import ModelReplicas
from controlplane.domain.observed import ObservedModel, ObservedPool
from controlplane.domain.profile import ProfileCorrection
from controlplane.domain.tick import TickStatus
from controlplane.metrics import ControlPlaneMetrics
from controlplane.placement_api import served_metrics
from controlplane.settings import load_settings
from controlplane.sim.clock import VirtualClock


def test_a_tick_is_counted_with_its_actions_held_changes_and_the_fleet_it_observed() -> None:
    registry = CollectorRegistry()
    ControlPlaneMetrics(registry).record(sample_tick_report())

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("headroom_reconcile_ticks_total", status="applied") == 1
    assert value("headroom_reconcile_tick_seconds_count") == 1
    assert value("headroom_reconcile_tick_seconds_sum") == 1.0
    assert value("headroom_plan_actions_total", kind="scale_node_pool") == 1
    assert value("headroom_plan_actions_total", kind="set_replicas") == 1
    assert value("headroom_plan_actions_held_total", reason="max_step") == 1
    assert value("headroom_action_failures_total", retryable="false") == 0
    assert value("headroom_model_rps", model="bert-embed", kind="observed") == 500
    assert value("headroom_model_rps", model="bert-embed", kind="capacity") == 600
    assert value("headroom_model_rps", model="bert-embed", kind="provisioned") == 600
    assert value("headroom_pool_nodes", pool="l4", state="ready") == 1
    assert value("headroom_pool_nodes", pool="l4", state="pending") == 1
    assert value("headroom_pool_nodes", pool="l4", state="target") == 2


def test_every_tick_status_and_failure_kind_is_a_zero_before_the_first_tick() -> None:
    # an alert on increase() sees a first failure only if the series was there before it
    registry = CollectorRegistry()
    ControlPlaneMetrics(registry)
    for status in ("applied", "dry_run", "skipped", "failed"):
        assert registry.get_sample_value("headroom_reconcile_ticks_total",
                                         {"status": status}) == 0
    for retryable in ("true", "false"):
        assert registry.get_sample_value("headroom_action_failures_total",
                                         {"retryable": retryable}) == 0


def test_a_skipped_tick_on_an_unsynced_snapshot_leaves_the_fleet_gauges_as_they_were() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = sample_tick_report()
    metrics.record(report)
    stale = replace(report.observed, synced=False, models=(), pools=())
    failed = (ActionOutcome("l4", False, "conflict", retryable=True),)
    metrics.record(replace(report, status=TickStatus.SKIPPED, observed=stale, plan=None,
                           demands=(), outcomes=failed))
    assert registry.get_sample_value("headroom_reconcile_ticks_total", {"status": "skipped"}) == 1
    assert registry.get_sample_value("headroom_action_failures_total",
                                     {"retryable": "true"}) == 1
    assert registry.get_sample_value("headroom_plan_actions_total",
                                     {"kind": "set_replicas"}) == 1
    assert registry.get_sample_value("headroom_pool_nodes", {"pool": "l4", "state": "ready"}) == 1


def test_a_model_whose_load_was_not_measured_has_no_observed_sample_not_a_zero() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = sample_tick_report()
    metrics.record(report)
    unknown = tuple(replace(m, demand_rps=0.0, demand_measured=False)
                    for m in report.observed.models)
    metrics.record(replace(report, observed=replace(report.observed, models=unknown)))
    for kind in ("observed", "finished"):
        labels = {"model": "bert-embed", "kind": kind}
        assert registry.get_sample_value("headroom_model_rps", labels) is None
    assert registry.get_sample_value("headroom_model_rps",
                                     {"model": "bert-embed", "kind": "capacity"}) == 600


def test_a_saturated_models_observed_rate_is_what_arrived_beside_what_it_finished() -> None:
    registry = CollectorRegistry()
    report = sample_tick_report()  # bert-embed finishing 500 rps
    queued = tuple(replace(m, queue_growth_rps=150.0) for m in report.observed.models)
    ControlPlaneMetrics(registry).record(
        replace(report, observed=replace(report.observed, models=queued)))
    assert registry.get_sample_value("headroom_model_rps",
                                     {"model": "bert-embed", "kind": "observed"}) == 650
    assert registry.get_sample_value("headroom_model_rps",
                                     {"model": "bert-embed", "kind": "finished"}) == 500


def test_deployment_scale_downs_are_counted_by_how_their_replicas_were_chosen() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    for result in ("steered", "ranked", "unsteered"):  # at 0 from the start, for increase()
        assert registry.get_sample_value("headroom_scale_down_steering_total",
                                         {"result": result}) == 0
    report = sample_tick_report()
    outcomes = (ActionOutcome("llama", True, "down", steering="steered"),
                ActionOutcome("bert", True, "down", steering="unsteered"),
                ActionOutcome("whisper", True, "up"),
                ActionOutcome("mistral", True, "down", steering="steered"))
    metrics.record(replace(report, outcomes=outcomes))
    counted = {result: registry.get_sample_value("headroom_scale_down_steering_total",
                                                 {"result": result})
               for result in ("steered", "ranked", "unsteered")}
    assert counted == {"steered": 2, "ranked": 0, "unsteered": 1}


READINGS: dict[str, Callable[[ObservedModel, float], ObservedModel]] = {
    "headroom_model_queued_requests": lambda m, v: replace(m, queued_requests=v),
    "headroom_model_kv_cache_usage": lambda m, v: replace(m, kv_cache_usage=v),
    "headroom_model_latency_ms": lambda m, v: replace(m, latency_ms=v)}


@pytest.mark.parametrize(("gauge", "value"), [("headroom_model_queued_requests", 42.0),
                                              ("headroom_model_kv_cache_usage", 0.93),
                                              ("headroom_model_latency_ms", 180.0)])
def test_a_models_queue_kv_cache_and_latency_are_gauges_with_no_sample_once_not_measured(
        gauge: str, value: float) -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = sample_tick_report()
    labels = {"model": "bert-embed"}
    metrics.record(report)  # not read: no sample, not a 0
    assert registry.get_sample_value(gauge, labels) is None
    read = tuple(READINGS[gauge](m, value) for m in report.observed.models)
    metrics.record(replace(report, observed=replace(report.observed, models=read)))
    assert registry.get_sample_value(gauge, labels) == value
    metrics.record(report)
    assert registry.get_sample_value(gauge, labels) is None


def test_each_model_whose_load_the_last_observing_tick_could_not_measure_is_a_one() -> None:
    """A Prometheus outage leaves no observed sample at all (nothing to compare with
    capacity): this gauge is what says so, 1 per model not measured, 0 once it is again."""
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = sample_tick_report()
    labels = {"model": "bert-embed"}
    metrics.record(report)
    assert registry.get_sample_value("headroom_model_load_unmeasured", labels) == 0
    unknown = tuple(replace(m, demand_rps=0.0, demand_measured=False)
                    for m in report.observed.models)
    metrics.record(replace(report, observed=replace(report.observed, models=unknown)))
    assert registry.get_sample_value("headroom_model_load_unmeasured", labels) == 1
    metrics.record(report)
    assert registry.get_sample_value("headroom_model_load_unmeasured", labels) == 0


def test_a_held_change_is_counted_by_its_reason_without_the_detail_it_names() -> None:
    registry = CollectorRegistry()
    report = sample_tick_report()
    assert report.plan is not None
    held = (SkippedAction("n1", 1, 0, "pool_relayout_in_flight:a100/n2"),
            SkippedAction("n3", 1, 0, "pool_relayout_in_flight:a100/n2"))
    ControlPlaneMetrics(registry).record(replace(report, plan=replace(report.plan,
                                                                      skipped=held)))
    assert registry.get_sample_value("headroom_plan_actions_held_total",
                                     {"reason": "pool_relayout_in_flight"}) == 2


def test_each_models_offline_and_corrected_profile_is_a_gauge() -> None:
    registry = CollectorRegistry()
    profile = ProfileCorrection("bert-embed", 300.0, 240.0, 0.8, 14, "over_slo: ...")
    ControlPlaneMetrics(registry).record(replace(sample_tick_report(), profiles=(profile,)))
    assert registry.get_sample_value("headroom_profile_throughput_rps",
                                     {"model": "bert-embed", "source": "offline"}) == 300.0
    assert registry.get_sample_value("headroom_profile_throughput_rps",
                                     {"model": "bert-embed", "source": "corrected"}) == 240.0


def test_the_model_rps_help_says_which_horizon_each_forecast_kind_covers() -> None:
    registry = CollectorRegistry()
    ControlPlaneMetrics(registry)
    help_line = next(line for line in generate_latest(registry).decode().splitlines()
                     if line.startswith("# HELP headroom_model_rps "))
    for kind in ("observed", "finished", "capacity", "provisioned", "forecast_p90",
                 "forecast_upper"):
        assert f"{kind} = " in help_line
    assert ("over the steps from the tick to the loop's lookahead ahead "
            "(autoscaling.reaction_s + autoscaling.cached_start_p90_s), not the p90 of the step "
            "20 minutes ahead that headroom status shows") in help_line
    assert "upper quantile that tick covered over the same lookahead" in help_line
    autoscaling = load_settings(None).autoscaling  # the settings it names are the loop's
    assert autoscaling.reaction_s > 0 and autoscaling.cached_start_p90_s >= 0


def test_each_models_demand_is_counted_by_its_reason_with_the_forecast_it_was_sized_from() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = sample_tick_report()
    metrics.record(report)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"model": "bert-embed", **labels})

    assert value("headroom_model_demand_total", reason="forecast_p90") == 1
    assert value("headroom_model_rps", kind="forecast_p90") == 480
    assert value("headroom_model_rps", kind="forecast_upper") is None  # not recorded: 0
    sized = replace(report.demands[0], forecast_upper_rps=520.0, reason="hot_headroom")
    metrics.record(replace(report, demands=(sized,)))
    assert value("headroom_model_demand_total", reason="hot_headroom") == 1
    assert value("headroom_model_rps", kind="forecast_upper") == 520
    stale = Demand("bert-embed", 650.0, 500.0, 0.0, "stale_forecast")
    metrics.record(replace(report, demands=(stale,)))
    metrics.record(replace(report, demands=(stale,)))
    assert value("headroom_model_demand_total", reason="stale_forecast") == 2
    assert value("headroom_model_demand_total", reason="forecast_p90") == 1
    # sized from the observed load: the last fresh forecast's values are not left standing
    assert value("headroom_model_rps", kind="forecast_p90") is None
    assert value("headroom_model_rps", kind="forecast_upper") is None
    assert value("headroom_model_rps", kind="provisioned") == 650


def test_each_models_recent_forecast_accuracy_is_a_gauge_gone_once_nothing_was_scored() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = sample_tick_report()

    def value(name: str) -> float | None:
        return registry.get_sample_value(name, {"model": "bert-embed"})

    metrics.record(replace(report, accuracy=(ForecastAccuracy("bert-embed", 12, 0.08, 0.92),)))
    assert value("headroom_forecast_wape_ratio") == 0.08
    assert value("headroom_forecast_p90_coverage_ratio") == 0.92
    metrics.record(replace(report, accuracy=(ForecastAccuracy("bert-embed", 3, None, 1.0),)))
    assert value("headroom_forecast_wape_ratio") is None  # nothing served in those steps
    assert value("headroom_forecast_p90_coverage_ratio") == 1.0
    metrics.record(report)  # none scored in the last hour
    assert value("headroom_forecast_wape_ratio") is None
    assert value("headroom_forecast_p90_coverage_ratio") is None


PAUSED_AT = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
L4_POOL = PoolSpec("l4", "L4", 4, 0, 8, 0.80)


def test_each_models_replicas_are_gauges_ready_as_observed_target_and_warm_as_decided() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = replace(sample_tick_report(), replicas=(ModelReplicas("bert-embed", 3, 2),))
    metrics.record(report)

    def value(kind: str) -> float | None:
        return registry.get_sample_value("headroom_model_replicas",
                                         {"model": "bert-embed", "kind": kind})

    assert (value("ready"), value("target"), value("warm")) == (2, 3, 2)
    # a tick that observed but did not decide refreshes what it saw, keeps the last decision
    seen = replace(report.observed.models[0], replicas_ready=3)
    metrics.record(replace(report, status=TickStatus.SKIPPED, plan=None, demands=(), replicas=(),
                           observed=replace(report.observed, models=(seen,))))
    assert (value("ready"), value("target"), value("warm")) == (3, 3, 2)


def test_a_models_unscheduled_replicas_are_a_gauge_with_no_sample_where_not_read() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = sample_tick_report()
    labels = {"model": "bert-embed", "kind": "unscheduled"}

    def seeing(unscheduled: int | None) -> None:
        models = tuple(replace(m, replicas_unscheduled=unscheduled)
                       for m in report.observed.models)
        metrics.record(replace(report, observed=replace(report.observed, models=models)))

    seeing(2)
    assert registry.get_sample_value("headroom_model_replicas", labels) == 2
    seeing(0)
    assert registry.get_sample_value("headroom_model_replicas", labels) == 0
    seeing(None)  # a fleet that does not report its pods (the simulator's simulate)
    assert registry.get_sample_value("headroom_model_replicas", labels) is None


def test_a_paused_model_is_one_with_its_start_and_zero_once_resumed() -> None:
    registry = CollectorRegistry()
    report = sample_tick_report()  # its store's clock is the wall clock
    metrics = ControlPlaneMetrics(registry, wall_clock=VirtualClock(report.finished_at))
    metrics.record(replace(report, replicas=(ModelReplicas("bert-embed", 2, 0, PAUSED_AT),)))
    labels = {"model": "bert-embed"}
    assert registry.get_sample_value("headroom_model_paused", labels) == 1
    assert registry.get_sample_value("headroom_model_paused_since_timestamp_seconds",
                                     labels) == PAUSED_AT.timestamp()
    metrics.record(replace(report, replicas=(ModelReplicas("bert-embed", 3),)))
    assert registry.get_sample_value("headroom_model_paused", labels) == 0
    assert registry.get_sample_value("headroom_model_paused_since_timestamp_seconds",
                                     labels) is None


@pytest.mark.parametrize("days", [-3, 2], ids=["store-clock-behind", "store-clock-ahead"])
def test_a_pauses_start_is_exported_on_the_wall_clocks_scale_when_the_stores_clock_is_off(
        days: int) -> None:
    """A demo's simulated clock days off the wall clock: the pause's start on it put
    HeadroomModelPaused (time() - the gauge > 1 day) firing at once, or never."""
    wall_now = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)
    store_now = wall_now + timedelta(days=days)
    report = replace(sample_tick_report(), started_at=store_now, finished_at=store_now,
                     replicas=(ModelReplicas("bert-embed", 2, 0,
                                             store_now - timedelta(seconds=30)),))
    registry = CollectorRegistry()
    ControlPlaneMetrics(registry, wall_clock=VirtualClock(wall_now)).record(report)
    assert registry.get_sample_value("headroom_model_paused_since_timestamp_seconds",
                                     {"model": "bert-embed"}) == wall_now.timestamp() - 30


def test_a_models_replica_bounds_are_gauges_where_its_spec_sets_them() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = sample_tick_report()

    def bound(name: str) -> float | None:
        return registry.get_sample_value("headroom_model_replica_bounds",
                                         {"model": "bert-embed", "bound": name})

    metrics.record(replace(report, replicas=(ModelReplicas("bert-embed", 3, 0, None, 2, 8),)))
    assert (bound("min"), bound("max")) == (2, 8)
    metrics.record(replace(report, replicas=(ModelReplicas("bert-embed", 3, 0, None, None, 8),)))
    assert (bound("min"), bound("max")) == (None, 8)  # min_replicas unset since


def test_a_models_latency_slo_is_a_gauge_from_its_spec_and_none_without_one() -> None:
    """Beside the latency read (``headroom_model_latency_ms``) for the alert
    HeadroomModelOverLatencySlo to compare."""
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    report = sample_tick_report()

    def slo() -> float | None:
        return registry.get_sample_value("headroom_model_latency_slo_ms", {"model": "bert-embed"})

    metrics.record(replace(report, replicas=(
        ModelReplicas("bert-embed", 3, 0, None, None, None, 50.0),)))
    assert slo() == 50.0
    metrics.record(replace(report, replicas=(ModelReplicas("bert-embed", 3),)))  # no spec
    assert slo() is None


def test_each_pools_cost_is_its_billed_nodes_gpus_at_its_configured_price() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry, (L4_POOL,))
    report = sample_tick_report()  # l4: 1 node ready, 1 provisioning, 4 GPUs each
    metrics.record(report)
    assert registry.get_sample_value("headroom_fleet_cost_usd_per_hour",
                                     {"pool": "l4"}) == pytest.approx(2 * 4 * 0.80)
    # a pool not configured here has no price: no sample rather than a guessed one
    unpriced = CollectorRegistry()
    ControlPlaneMetrics(unpriced).record(report)
    assert unpriced.get_sample_value("headroom_fleet_cost_usd_per_hour", {"pool": "l4"}) is None
    assert unpriced.get_sample_value("headroom_pool_nodes", {"pool": "l4", "state": "ready"}) == 1


FLEET_GAUGES = ("headroom_model_rps", "headroom_pool_nodes", "headroom_forecast_wape_ratio",
                "headroom_forecast_p90_coverage_ratio", "headroom_profile_throughput_rps",
                "headroom_model_replicas", "headroom_model_paused",
                "headroom_model_paused_since_timestamp_seconds", "headroom_model_replica_bounds",
                "headroom_fleet_cost_usd_per_hour", "headroom_model_load_unmeasured",
                "headroom_model_latency_ms", "headroom_model_latency_slo_ms")


def test_the_loading_guards_changes_are_counted_by_reason_beside_the_pods_it_holds() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)

    def changes(change: str, reason: str) -> float | None:
        return registry.get_sample_value("headroom_loading_guard_changes_total",
                                         {"change": change, "reason": reason})

    assert changes("release", "loading_too_long") == 0  # there before the first, for increase()
    metrics.loading_guard.record(GuardSync((
        GuardChange("models", "m-0", True, "loading: not ready for 60 s"),
        GuardChange("models", "m-1", True, "loading: not ready for 5 s"),
        GuardChange("models", "m-2", False, "loading_too_long: not ready 900 s after ..."),
    ), 3))
    assert (changes("guard", "loading"), changes("release", "loading_too_long")) == (2, 1)
    assert changes("release", "ready") == 0
    assert registry.get_sample_value("headroom_loading_guard_pods") == 3
    metrics.loading_guard.record(GuardSync())  # read nothing: the count stands
    assert registry.get_sample_value("headroom_loading_guard_pods") == 3
    metrics.forget_fleet()  # a replica that does not lead holds none
    assert registry.get_sample_value("headroom_loading_guard_pods") == 0
    assert changes("guard", "loading") == 2


def test_a_replica_that_stops_leading_exports_no_fleet_gauges_and_leader_zero() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry, (L4_POOL,))
    assert registry.get_sample_value("headroom_leader") == 0.0  # not led yet
    report = sample_tick_report()
    metrics.record(replace(report,
                           profiles=(ProfileCorrection("bert-embed", 300.0, 240.0, 0.8, 14, ""),),
                           accuracy=(ForecastAccuracy("bert-embed", 12, 0.08, 0.92),),
                           replicas=(ModelReplicas("bert-embed", 3, 1, PAUSED_AT, 1, 4, 50.0),),
                           observed=replace(report.observed, models=tuple(
                               replace(m, latency_ms=42.0) for m in report.observed.models))))

    def fleet_samples() -> set[str]:
        return {s.name for family in registry.collect() for s in family.samples
                if s.name in FLEET_GAUGES}

    assert fleet_samples() == set(FLEET_GAUGES)
    assert registry.get_sample_value("headroom_leader") == 1.0
    metrics.forget_fleet()
    assert fleet_samples() == set()
    assert registry.get_sample_value("headroom_leader") == 0.0
    assert registry.get_sample_value("headroom_reconcile_ticks_total", {"status": "applied"}) == 1


def test_a_model_or_pool_a_tick_no_longer_sees_has_no_samples_not_its_last_values() -> None:
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry, (L4_POOL, PoolSpec("a100", "A100", 8, 0, 4, 4.1)))
    report = sample_tick_report()
    gone = ObservedModel("llama-8b", 1, 0, 1, 40.0, 90.0)
    assert report.plan is not None
    metrics.record(replace(
        report, observed=replace(report.observed, models=(*report.observed.models, gone),
                                 pools=(*report.observed.pools,
                                        ObservedPool("a100", "A100", 8, 2, 0, 2))),
        demands=(*report.demands, Demand("llama-8b", 90.0, 40.0, 60.0, "forecast_p90")),
        profiles=(ProfileCorrection("llama-8b", 50.0, 45.0, 0.9, 14, ""),),
        accuracy=(ForecastAccuracy("llama-8b", 12, 0.7, 0.5),),
        replicas=(ModelReplicas("bert-embed", 3),
                  ModelReplicas("llama-8b", 1, 1, PAUSED_AT, 1, 2, 800.0))))

    def llama_and_a100() -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        return {(s.name, tuple(sorted(s.labels.items()))) for family in registry.collect()
                for s in family.samples if family.type == "gauge"
                and (s.labels.get("model") == "llama-8b" or s.labels.get("pool") == "a100")}

    # 5 model_rps, 1 load_unmeasured, 2 profile, 2 accuracy, 3 replicas, paused and since, 2
    # bounds, latency SLO; 3 pool_nodes, 1 cost
    assert len(llama_and_a100()) == 22
    # a tick that cannot see the fleet keeps them (nothing known to replace them)
    unsynced = replace(report.observed, synced=False, models=(), pools=())
    metrics.record(replace(report, status=TickStatus.SKIPPED, observed=unsynced, plan=None,
                           demands=()))
    assert len(llama_and_a100()) == 22
    # llama-8b's workloads are gone, the a100 pool too: the next tick sees only bert-embed, l4
    metrics.record(replace(report, replicas=(ModelReplicas("bert-embed", 3),)))
    assert llama_and_a100() == set()
    assert registry.get_sample_value("headroom_model_replicas",
                                     {"model": "bert-embed", "kind": "target"}) == 3
    assert registry.get_sample_value("headroom_fleet_cost_usd_per_hour",
                                     {"pool": "l4"}) == pytest.approx(6.4)
    assert registry.get_sample_value("headroom_model_rps",
                                     {"model": "bert-embed", "kind": "capacity"}) == 600
    assert registry.get_sample_value("headroom_pool_nodes", {"pool": "l4", "state": "ready"}) == 1
    # its demand counter stays: a counter is never removed (it stops moving)
    assert registry.get_sample_value("headroom_model_demand_total",
                                     {"model": "llama-8b", "reason": "forecast_p90"}) == 1


def test_the_served_loop_metrics_price_the_configured_pools() -> None:
    served = served_metrics(load_settings(placement={"metrics_listen": "127.0.0.1:0"}))
    try:
        assert served.loop is not None and served.placement is not None
        served.loop.record(sample_tick_report())  # pool l4 (0.80 $/GPU-h): 2 nodes of 4 GPUs
        assert served.placement.registry.get_sample_value(
            "headroom_fleet_cost_usd_per_hour", {"pool": "l4"}) == pytest.approx(6.4)
    finally:
        served.stop()
