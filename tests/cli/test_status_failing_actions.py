"""`headroom status` over a store whose ticks retry the same action and fail every time (an API
answering 500 to each scale): unhealthy once it has failed on every deciding tick for 5
minutes, naming the action and its error; one failed tick is still healthy."""

from __future__ import annotations

from datetime import datetime, timedelta

from clihelpers import headroom_status, status_json

from controlplane.adapters.clock import WallClock
from controlplane.domain.actions import ActionOutcome, SetReplicas
from controlplane.domain.guards import GuardMemory
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.domain.placement import FleetPlacement
from controlplane.domain.plan import Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.store import Store

FAULT = "HTTP 500: injected fault 500"


def _tick(store: Store, at: datetime, ok: bool) -> None:
    observed = ObservedState(at, (), (), (ObservedModel("llama-3-70b", 3, 0, 3, 10.0, 60.0),))
    plan = Plan(at, (SetReplicas("llama-3-70b", 3, 5, "paused"),), ())
    outcome = ActionOutcome("llama-3-70b", ok, "ok" if ok else FAULT, retryable=not ok)
    placement = FleetPlacement(revision=1, segments=(), gpu_ids_by_product=(), warm_pools=(),
                               cost_per_hour=0.0, unplaced=())
    store.save_tick(TickReport(at, at, TickStatus.APPLIED, "", observed, (), placement, plan,
                               (outcome,), GuardMemory()))


def _ticks(url: str, *oks: bool) -> None:
    """One tick every 30 s per outcome, the last one 10 s before now."""
    store = Store.open(url, migrate=True)
    last_at = WallClock().now() - timedelta(seconds=10)
    for k, ok in enumerate(oks):
        _tick(store, last_at - timedelta(seconds=30 * (len(oks) - 1 - k)), ok)
    store.engine.dispose()


def test_an_action_failing_on_every_tick_for_five_minutes_exits_1_naming_it(
        sqlite_url: str) -> None:
    _ticks(sqlite_url, True, *[False] * 11)
    doc = status_json(sqlite_url)
    assert doc["healthy"] is False and [p["code"] for p in doc["problems"]] == [
        "failing_actions"]
    assert doc["problems"][0]["message"] == (
        "set_replicas llama-3-70b has failed on each of the last 11 deciding ticks (300 s, "
        f"since tick #2): {FAULT}")
    (failing,) = doc["failing_actions"]
    assert (failing["kind"], failing["target"], failing["ticks"], failing["since_tick_id"],
            failing["message"]) == ("set_replicas", "llama-3-70b", 11, 2, FAULT)
    table = headroom_status(sqlite_url)
    assert table.returncode == 1
    assert table.stdout.splitlines()[-1].startswith(
        "unhealthy: set_replicas llama-3-70b has failed on each of the last 11 deciding ticks")


def test_a_failure_on_fewer_ticks_than_five_minutes_is_shown_and_healthy(
        sqlite_url: str) -> None:
    _ticks(sqlite_url, True, *[False] * 10)
    doc = status_json(sqlite_url)
    assert doc["healthy"] is True and doc["failing_actions"] == []
    assert doc["plan"]["actions"][0]["message"] == FAULT
    assert headroom_status(sqlite_url).returncode == 0
