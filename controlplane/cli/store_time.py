"""Now for the store a command works on (``controlplane.domain.store_clock``): a command that
judges a stored time against now (a hint not ended yet) or stamps one (a pause's start, a
forecast's origin) uses the clock the store's loop runs on, a simulated fleet's when the store
has one, or its answer disagrees with the loop's (a hint it calls ended floors the model again)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controlplane.adapters.clock import WallClock

if TYPE_CHECKING:  # imported where used: the commands' help loads no store
    from controlplane.domain.store_clock import StoreNow
    from controlplane.store import Store


def now_of(store: Store) -> StoreNow:
    """Now for ``store``: its simulated fleet's last tick, else the wall clock."""
    from controlplane.fleet_lease import FLEET_LEASE
    from controlplane.store.store_clock import read_store_now

    return read_store_now(store.engine, FLEET_LEASE, WallClock().now())


def runs_a_simulated_fleet(store: Store) -> bool:
    """Whether ``store`` is a simulated fleet's (``headroom demo``, ``serve --backend sim``:
    its ``sim-fleet`` lease, held or released), which runs only the demo's models."""
    from controlplane.fleet_lease import FLEET_LEASE
    from controlplane.store.store_clock import simulated_store

    return simulated_store(store.engine, FLEET_LEASE)
