"""Now for a store is the clock its loop runs on: a simulated fleet's last tick, else the wall
clock; what judges a hint's end against it names which."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.domain.store_clock import StoreNow, store_now

WALL = datetime(2026, 12, 5, 18, 9, 5, tzinfo=UTC)
TICK = datetime(2026, 12, 10, 8, 10, tzinfo=UTC)


def test_a_simulated_store_is_at_its_last_tick_ahead_of_or_behind_the_wall_clock() -> None:
    assert store_now(True, TICK, WALL) == StoreNow(TICK, True)
    behind = TICK - timedelta(days=7)
    assert store_now(True, behind, WALL) == StoreNow(behind, True)


def test_a_real_fleet_or_a_simulated_one_before_its_first_tick_is_at_the_wall_clock() -> None:
    assert store_now(False, TICK, WALL) == StoreNow(WALL, False)
    assert store_now(True, None, WALL) == StoreNow(WALL, False)


def test_the_clock_is_named_with_the_time() -> None:
    assert StoreNow(TICK, True).text() == "2026-12-10T08:10:00Z by the store's simulated clock"
    assert StoreNow(WALL, False).text() == "2026-12-05T18:09:05Z by the wall clock"
