"""A plan's warm pool is stored per product (plans.warm_gpus_json, migration 0020), so the cost
lines put each warm GPU on the product the plan keeps it on, at that product's price. A plan
written before (only the fleet total, warm_gpus) still spreads the total over the products with
unplaced GPUs, in proportion (``attribute_warm``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, update

from controlplane import cost_reader
from controlplane.domain.guards import GuardMemory
from controlplane.domain.observed import ObservedPool, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment, WarmGpus
from controlplane.domain.plan import Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.store import Store, downgrade, upgrade
from dashboard import costing

AT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
H100_USD_PER_GPU_HOUR = 6.88  # the default prices (REFERENCE.md §10.1)
A100_USD_PER_GPU_HOUR = 5.12


def _tick_keeping_two_h100s_warm() -> TickReport:
    """Pools of 1 node x 8 GPUs each of A100-80GB and H100-80GB; 6 A100s and 6 H100s placed,
    so each pool has 2 unplaced GPUs; the plan keeps 2 H100-80GB warm."""
    pools = (ObservedPool("a100", "A100-80GB", 8, 1, 0, 1),
             ObservedPool("h100", "H100-80GB", 8, 1, 0, 1))
    segments = tuple(PlacedSegment("llama-8b", f"{product}-{i}", product, "exclusive", "", 0, 0,
                                   40.0)
                     for product in ("A100-80GB", "H100-80GB") for i in range(6))
    placement = FleetPlacement(
        revision=1, segments=segments,
        gpu_ids_by_product=tuple((p, tuple(f"{p}-{i}" for i in range(6)))
                                 for p in ("A100-80GB", "H100-80GB")),
        warm_pools=(WarmGpus("H100-80GB", 2, "p90"),), cost_per_hour=0.0, unplaced=())
    return TickReport(AT, AT + timedelta(seconds=1), TickStatus.APPLIED, "",
                      ObservedState(AT, pools, (), ()), (), placement, Plan(AT, (), ()), (),
                      GuardMemory(()))


def _warm_lines(url: str) -> dict[str, tuple[float, float]]:
    lines = costing.cost_now(url)
    warm = lines[lines["category"] == "warm"]
    return {str(r.product): (float(r.gpus), float(r.usd_per_hour))
            for r in warm.itertuples(index=False)}


def test_a_plan_keeping_two_h100s_warm_bills_both_on_h100_at_its_price(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_tick(_tick_keeping_two_h100s_warm())
    assert _warm_lines(store_url) == {
        "H100-80GB": pytest.approx((2.0, 2 * H100_USD_PER_GPU_HOUR))}
    store.engine.dispose()


def test_a_plan_written_before_warm_gpus_were_stored_per_product_spreads_its_total(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_tick(_tick_keeping_two_h100s_warm())
    plans = cost_reader.table("plans")
    with store.engine.begin() as connection:
        connection.execute(update(plans).values(warm_gpus_json=None))
    assert _warm_lines(store_url) == {
        "A100-80GB": pytest.approx((1.0, A100_USD_PER_GPU_HOUR)),
        "H100-80GB": pytest.approx((1.0, H100_USD_PER_GPU_HOUR))}
    store.engine.dispose()


def test_migration_0020_adds_the_per_product_column_and_its_downgrade_drops_it(
        store_url: str) -> None:
    store = Store.open(store_url)
    upgrade(store.engine, "0019")
    assert "warm_gpus_json" not in {c["name"] for c in inspect(store.engine).get_columns("plans")}
    upgrade(store.engine)
    assert "warm_gpus_json" in {c["name"] for c in inspect(store.engine).get_columns("plans")}
    store.save_tick(_tick_keeping_two_h100s_warm())
    downgrade(store.engine, "0019")
    assert "warm_gpus_json" not in {c["name"] for c in inspect(store.engine).get_columns("plans")}
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT warm_gpus FROM plans").scalar_one() == 2
    store.engine.dispose()
