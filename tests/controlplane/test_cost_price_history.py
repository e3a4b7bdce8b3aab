"""A price change bills from when it was applied: showback of the days before it keeps the
price then in force, and the day it happens is split at the change. Prices are kept as a
history (``gpu_price_history``, migration 0012, seeded with the prices in force at the upgrade);
the current price table is what the dashboard shows as the price now."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event, select
from tick_builders import T0, sample_tick_report

from controlplane import cost_export, cost_reader
from controlplane.domain.cost import PriceError
from controlplane.domain.desired import PoolSpec
from controlplane.store import Store, upgrade

DAY = timedelta(days=1)


def _l4(usd_per_gpu_hour: float) -> list[PoolSpec]:
    return [PoolSpec("l4", "L4", 4, 0, 4, usd_per_gpu_hour)]


def _usd_per_day(store: Store) -> dict[str, float]:
    """The window T0 (noon) .. T0 + 1 day; the one tick bills 8 L4 GPUs (2 nodes x 4)."""
    result = cost_export.showback(store.engine, cost_reader.price_history(store.engine), T0,
                                  T0 + DAY, step_s=300)
    out: dict[str, float] = {}
    for a in result.accruals:
        out[a.day] = out.get(a.day, 0.0) + a.usd
    return out


def test_a_price_changed_mid_day_bills_the_old_price_before_and_the_new_one_after(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_prices(_l4(0.75), T0 - timedelta(hours=1))
    store.save_tick(sample_tick_report())
    store.upsert_prices(_l4(1.50), T0 + timedelta(hours=18))  # day 2, 06:00 UTC
    assert _usd_per_day(store) == {
        "2026-03-02": pytest.approx(12 * 8 * 0.75),
        "2026-03-03": pytest.approx(6 * 8 * 0.75 + 6 * 8 * 1.50)}


def test_restarting_with_the_same_price_records_no_change(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    for hours in (0, 5, 9):
        store.upsert_prices(_l4(0.75), T0 + timedelta(hours=hours))
    history = cost_reader.table("gpu_price_history")
    with store.engine.connect() as connection:
        rows = list(connection.execute(select(history.c.product, history.c.effective_at)))
    assert [product for product, _ in rows] == ["L4"]


class HistoryWriteFailed(Exception):
    """The failure injected into the price history's insert."""


def test_a_price_change_whose_history_write_fails_leaves_the_price_and_its_history_as_they_were(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_prices(_l4(0.75), T0)

    @event.listens_for(store.engine, "before_cursor_execute")
    def fail_the_history_insert(_connection: object, _cursor: object, statement: str,
                                *_: object) -> None:
        if statement.startswith("INSERT INTO gpu_price_history"):
            raise HistoryWriteFailed(statement)

    with pytest.raises(HistoryWriteFailed):
        store.upsert_prices(_l4(1.50), T0 + DAY)
    event.remove(store.engine, "before_cursor_execute", fail_the_history_insert)
    history = cost_reader.table("gpu_price_history")
    with store.engine.connect() as connection:
        rows = list(connection.execute(select(history.c.price_per_gpu_hour)))
    assert [price for (price,) in rows] == [0.75]
    assert [(p.product, p.usd_per_gpu_hour) for p in cost_reader.configured_prices(
        store.engine)] == [("L4", 0.75)]


def test_the_upgrade_keeps_the_price_in_force_for_the_past_and_a_later_change_splits_it(
        store_url: str) -> None:
    store = Store.open(store_url)
    upgrade(store.engine, "0011")
    store_at_0011 = cost_reader.table("gpu_prices")
    with store.engine.begin() as connection:
        connection.execute(store_at_0011.insert().values(
            product="L4", price_per_gpu_hour=0.75, source="settings pools[l4]",
            as_of="2026-01-01"))
    upgrade(store.engine)
    store.save_tick(sample_tick_report())
    store.upsert_prices(_l4(1.50), T0 + timedelta(hours=18))
    assert _usd_per_day(store) == {
        "2026-03-02": pytest.approx(12 * 8 * 0.75),
        "2026-03-03": pytest.approx(6 * 8 * 0.75 + 6 * 8 * 1.50)}


def test_two_pools_of_one_product_at_different_prices_are_refused_not_billed_at_the_last_ones(
        store_url: str) -> None:
    """Prices are per GPU product (settings allow one pool per product): a second pool's price
    would silently bill the first pool's GPU-hours, so the store refuses it naming both."""
    store = Store.open(store_url, migrate=True)
    with pytest.raises(PriceError) as caught:
        store.upsert_prices([PoolSpec("a100-spot", "A100-80GB", 8, 0, 4, 1.60),
                             PoolSpec("a100-ondemand", "A100-80GB", 8, 0, 4, 4.10)], T0)
    assert ("pools[a100-spot].price_per_gpu_hour (1.6) and "
            "pools[a100-ondemand].price_per_gpu_hour (4.1)") in str(caught.value)
    assert "A100-80GB" in str(caught.value)
    assert cost_reader.configured_prices(store.engine) == ()


def test_two_pools_of_one_product_at_one_price_record_it_once(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_prices([PoolSpec("a100-a", "A100-80GB", 8, 0, 4, 1.60),
                         PoolSpec("a100-b", "A100-80GB", 8, 0, 4, 1.60)], T0)
    assert [(p.product, p.usd_per_gpu_hour)
            for p in cost_reader.configured_prices(store.engine)] == [("A100-80GB", 1.60)]


@pytest.mark.parametrize("step_s", [60.0, 3600.0, 7200.0, 86400.0],
                         ids=["1 min", "1 h", "2 h", "1 day"])
def test_a_constant_fleet_bills_a_price_change_between_samples_exactly_at_any_step(
        store_url: str, step_s: float) -> None:
    """The price changes at 06:07:30 UTC, between samples at every step: the fleet sampled
    before it holds, its price from the change on."""
    store = Store.open(store_url, migrate=True)
    store.upsert_prices(_l4(0.75), T0 - timedelta(hours=1))
    store.save_tick(sample_tick_report())
    changed_at = T0 + timedelta(hours=18, minutes=7, seconds=30)
    store.upsert_prices(_l4(1.50), changed_at)
    result = cost_export.showback(store.engine, cost_reader.price_history(store.engine), T0,
                                  T0 + DAY, step_s=step_s)
    before_h = (changed_at - T0) / timedelta(hours=1)
    assert sum(a.usd for a in result.accruals) == pytest.approx(
        8 * 0.75 * before_h + 8 * 1.50 * (24 - before_h), rel=1e-12)
