"""`headroom status` when the metrics source is down: every model's load unknown says so in one
line above the verdict (how many of how many, which), and in --json; the exit code stays the
loop's health, as README documents."""

from __future__ import annotations

from datetime import timedelta

from clihelpers import headroom_status, status_json

from controlplane.adapters.clock import WallClock
from controlplane.domain.guards import GuardMemory
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.domain.placement import FleetPlacement
from controlplane.domain.plan import Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.store import Store

NOTE = "demand not measured this tick: Prometheus query failed: connection refused"


def test_models_whose_load_was_not_measured_are_counted_and_named_above_the_verdict(
        sqlite_url: str) -> None:
    at = WallClock().now() - timedelta(seconds=10)
    observed = ObservedState(at, (), (), (
        ObservedModel("bert-embed", 2, 0, 2, 0.0, 60.0, False),
        ObservedModel("llama-3-70b", 3, 0, 3, 0.0, 30.0, False),
        ObservedModel("t5-small", 1, 0, 1, 4.0, 20.0)),
        notes=(f"bert-embed: {NOTE}", f"llama-3-70b: {NOTE}"))
    placement = FleetPlacement(revision=1, segments=(), gpu_ids_by_product=(), warm_pools=(),
                               cost_per_hour=0.0, unplaced=())
    store = Store.open(sqlite_url, migrate=True)
    store.save_tick(TickReport(at, at, TickStatus.APPLIED, "", observed, (), placement,
                               Plan(at, (), ()), (), GuardMemory()))
    store.engine.dispose()
    doc = status_json(sqlite_url)
    assert doc["load_unmeasured"] == ["bert-embed", "llama-3-70b"]
    table = headroom_status(sqlite_url)
    assert table.returncode == 0
    assert table.stdout.splitlines()[-2:] == [
        "load not measured for 2 of 3 model(s) by tick #1: bert-embed, llama-3-70b (they keep "
        "the capacity they have and nothing scales down on them; the tick's notes say why)",
        "healthy"]
