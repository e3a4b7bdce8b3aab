"""A demand hint through the whole loop: the fleet is ready for the announced demand when its
window starts, although nothing in the model's history forecasts it, and the forecasts the
loop issues (and calibrates from) stay the forecaster's. Real core, simulated fleet with node
provisioning and cold starts, in-process placement, SQLite."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta

import pytest

from controlplane import reconcile
from controlplane.domain.actions import SetReplicas
from controlplane.domain.hints import DemandHint
from controlplane.domain.tick import TickReport
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.hints import SqlDemandHints
from controlplane.store.pauses import SqlModelPauses

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
CHAT = "llama-3-8b-chat"
ANNOUNCED_RPS = 600.0  # about four times what the model sees at this hour
STARTS_AT = T0 + timedelta(minutes=25)


def _capacity_at_window_start(url: str, announce: bool
                              ) -> tuple[float, float, SimRuntime, list[SetReplicas]]:
    """The model's demand and ready capacity the minute its announced window starts, and the
    loop's replica actions for it until then."""
    settings = load_settings(db={"url": url},
                             sim={"history_s": 6 * 3600, "start_warm": True,
                                  "true_throughput_factor": {}})
    store = Store.open(url, migrate=True)
    if announce:
        SqlDemandHints(store.engine).add_hint(DemandHint(
            CHAT, ANNOUNCED_RPS, STARTS_AT, STARTS_AT + timedelta(minutes=30), "launch"), T0)
    runtime = SimRuntime.open(settings, store, T0)
    actions: list[SetReplicas] = []
    runtime.on_tick = lambda report, _saved: actions.extend(
        a for a in (report.plan.actions if report.plan else ())
        if isinstance(a, SetReplicas) and a.model == CHAT)
    runtime.advance((STARTS_AT - T0).total_seconds())
    model = next(m for m in runtime.cluster.snapshot().models if m.name == CHAT)
    return model.demand_rps, model.capacity_rps, runtime, actions


def test_the_fleet_is_ready_for_announced_demand_when_its_window_starts(
        sqlite_url: str) -> None:
    demand_rps, capacity_rps, runtime, actions = _capacity_at_window_start(sqlite_url,
                                                                           announce=True)
    assert demand_rps < ANNOUNCED_RPS / 2  # the trace itself does not announce it
    assert capacity_rps >= ANNOUNCED_RPS
    # the plan says why: the scale-up's reason names the hint
    scale_up = max(actions, key=lambda a: a.to_replicas)
    assert scale_up.to_replicas * 40.0 >= ANNOUNCED_RPS
    assert scale_up.reason.endswith("+demand_hint"), scale_up
    # the stored forecasts are the forecaster's: the floor is the tick's, not the ledger's
    stored = runtime.store.latest_forecasts()[CHAT]
    assert max(stored.p90) < ANNOUNCED_RPS / 2


def test_without_the_hint_the_same_fleet_is_sized_for_its_forecast(sqlite_url: str) -> None:
    demand_rps, capacity_rps, _, actions = _capacity_at_window_start(sqlite_url,
                                                                     announce=False)
    assert demand_rps <= capacity_rps < ANNOUNCED_RPS / 2
    assert not any("demand_hint" in a.reason for a in actions)


def test_a_reactive_loop_with_hints_stored_warns_once_that_it_never_reads_them(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    reconcile._warn_hints_unread.cache_clear()  # once per process: this test's process
    settings = load_settings(db={"url": sqlite_url}, autoscaling={"policy": "reactive"},
                             sim={"history_s": 3600, "start_warm": True,
                                  "true_throughput_factor": {}})
    store = Store.open(sqlite_url, migrate=True)
    SqlDemandHints(store.engine).add_hint(DemandHint(
        CHAT, ANNOUNCED_RPS, T0, T0 + timedelta(hours=1), "launch"), T0)
    runtime = SimRuntime.open(settings, store, T0)
    reasons: list[str] = []
    runtime.on_tick = lambda report, _saved: reasons.extend(
        a.reason for a in (report.plan.actions if report.plan else ())
        if isinstance(a, SetReplicas))
    with caplog.at_level(logging.WARNING, logger="headroom"):
        runtime.advance(5 * 60)
    unread = [r for r in caplog.records if r.getMessage() == "hints.unread"]
    assert len(unread) == 1  # before: nothing said the hint shaped nothing
    assert "only shape the predictive policy" in unread[0].__dict__["error"]
    assert not any("demand_hint" in r for r in reasons)


def test_a_hint_beyond_what_the_pool_can_hold_is_capped_and_the_plan_says_served_of_announced(
        sqlite_url: str) -> None:
    """20000 rps on the chat model would take 625 replicas; the A100 pool holds 128 at
    max_nodes, shared with two other models: the loop scales as far as it can, and its replica
    target's reason and the tick's record say the hint was capped, served of announced."""
    settings = load_settings(db={"url": sqlite_url},
                             sim={"history_s": 3600, "start_warm": True,
                                  "true_throughput_factor": {}})
    store = Store.open(sqlite_url, migrate=True)
    SqlDemandHints(store.engine).add_hint(DemandHint(
        CHAT, 20000.0, T0, T0 + timedelta(hours=1), "launch"), T0)
    runtime = SimRuntime.open(settings, store, T0)
    actions: list[SetReplicas] = []
    notes: list[str] = []

    def on_tick(report: object, _saved: object) -> None:
        assert isinstance(report, TickReport)
        actions.extend(a for a in (report.plan.actions if report.plan else ())
                       if isinstance(a, SetReplicas) and a.model == CHAT)
        notes[:] = report.observed.notes

    runtime.on_tick = on_tick
    runtime.advance(5 * 60)
    scale_up = max(actions, key=lambda a: a.to_replicas)
    # the target the cap left (the guards step towards it) is sized for 40 rps x 0.8 a replica
    reason = re.fullmatch(r"pool_max_nodes:a100-80gb\+demand_hint_capped:(\d+)/20000rps",
                          scale_up.reason)
    assert reason is not None, scale_up
    served_rps = int(reason[1])
    assert served_rps % 32 == 0 and scale_up.to_replicas * 32 <= served_rps <= 128 * 32
    # the last tick's record notes it (headroom status shows the notes of the last tick)
    capped = [re.fullmatch(rf"demand hint on {CHAT}: 20000 rps announced, (\d+) replicas sized "
                           r"for (\d+) rps: capped by pool_max_nodes:a100-80gb", n) for n in notes]
    found = [m for m in capped if m is not None]
    assert len(found) == 1 and int(found[0][2]) == int(found[0][1]) * 32  # 40 rps x 0.8


def test_a_hint_on_a_paused_model_leaves_it_held_and_each_tick_notes_that_the_pause_wins(
        sqlite_url: str) -> None:
    """The hint floors the forecast, but the pause holds the model at its count; the tick's
    record says so (before: nothing did, and status said the loop sized from the floor)."""
    settings = load_settings(db={"url": sqlite_url},
                             sim={"history_s": 3600, "start_warm": True,
                                  "true_throughput_factor": {}})
    store = Store.open(sqlite_url, migrate=True)
    SqlDemandHints(store.engine).add_hint(DemandHint(
        CHAT, ANNOUNCED_RPS, T0, T0 + timedelta(hours=1), "launch"), T0)
    runtime = SimRuntime.open(settings, store, T0)  # lists the demo's models
    assert SqlModelPauses(store.engine).pause(CHAT, 3, T0, "ops")
    notes: list[str] = []
    runtime.on_tick = lambda report, _saved: notes.__setitem__(slice(None),
                                                               report.observed.notes)
    runtime.advance(3 * 60)
    assert runtime.cluster.snapshot().model(CHAT).replicas_target == 3  # type: ignore[union-attr]
    assert (f"demand hint on {CHAT}: 600 rps announced, but the model is paused since "
            f"2026-01-05T09:00:00Z by ops, held at 3 replica(s) until `headroom models resume "
            f"{CHAT}`") in notes
