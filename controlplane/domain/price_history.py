"""GPU prices over time (pure): each product's recorded price changes, and the price table in
force at an instant, so a past day is billed at the price it had then, not today's.

A product's price at ``at`` is its newest change at or before ``at``; before its first recorded
change, that first one (the earliest price known: a store upgraded to price history seeds it
with the prices then in force, undated). A product with no recorded change takes ``current``
(defaults overridden by the configured prices), as every product did before prices had a
history."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from controlplane.domain.cost import (
    CostLine,
    FleetSnapshot,
    GpuPrice,
    PriceError,
    PriceTable,
    fleet_cost_rate,
)
from controlplane.domain.desired import PoolSpec

_EARLIEST = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class PriceChange:
    effective_at: datetime | None  # None: in force since before anything was recorded
    price: GpuPrice


class PriceHistory:
    """The price table in force at each instant, from ``current`` and ``changes``."""

    def __init__(self, current: PriceTable, changes: Iterable[PriceChange] = ()) -> None:
        ordered = sorted(changes, key=lambda c: (c.effective_at is not None,
                                                 c.effective_at or _EARLIEST))
        first: dict[str, GpuPrice] = {}
        for change in ordered:
            first.setdefault(change.price.product, change.price)
        base = current.with_overrides(first.values())
        self.times: list[datetime] = []
        self.tables: list[PriceTable] = [base]  # tables[i]: in force from times[i - 1]
        in_force = dict(first)
        for change in ordered:
            in_force[change.price.product] = change.price
            table = base.with_overrides(in_force.values())
            if change.effective_at is None:
                self.tables[0] = table
            elif self.times and self.times[-1] == change.effective_at:
                self.tables[-1] = table
            else:
                self.times.append(change.effective_at)
                self.tables.append(table)

    def at(self, when: datetime) -> PriceTable:
        """The prices in force at ``when``."""
        return self.tables[bisect.bisect_right(self.times, when)]

    def changes_between(self, after_at: datetime, before_at: datetime) -> list[datetime]:
        """The instants a price changed strictly after ``after_at`` and before ``before_at``."""
        return self.times[bisect.bisect_right(self.times, after_at):
                          bisect.bisect_left(self.times, before_at)]

    @staticmethod
    def fixed(table: PriceTable) -> PriceHistory:
        """``table`` at every instant (e.g. a what-if price table)."""
        return PriceHistory(table)


def fleet_cost_rates(snapshots: Sequence[FleetSnapshot], history: PriceHistory,
                     until_at: datetime) -> list[tuple[datetime, tuple[CostLine, ...]]]:
    """Each sampled fleet's cost lines ($/h) at the prices in force at its instant, and again
    from each price change inside the span it is held for (until the next sample, the last one
    until ``until_at``), in time order: the sampled fleet holds between samples, its price does
    not. ``accrue`` over them bills a price change from its exact time whatever the sampling
    step; only the fleet's own changes between samples are approximated."""
    ordered = sorted(snapshots, key=lambda s: s.at)
    rates: list[tuple[datetime, tuple[CostLine, ...]]] = []
    last: tuple[FleetSnapshot, PriceTable, tuple[CostLine, ...]] | None = None
    for i, snapshot in enumerate(ordered):
        held_until = ordered[i + 1].at if i + 1 < len(ordered) else until_at
        for at in (snapshot.at, *history.changes_between(snapshot.at, held_until)):
            prices = history.at(at)
            # a fleet kept from one tick to the next (most ticks) costs what it did
            lines = (last[2] if last is not None and last[1] is prices
                     and _alike(last[0], snapshot) else fleet_cost_rate(snapshot, prices))
            last = (snapshot, prices, lines)
            rates.append((at, lines))
    return rates


def _alike(a: FleetSnapshot, b: FleetSnapshot) -> bool:
    """The same fleet, at whatever instants."""
    return (a.placed == b.placed and a.billed_gpus == b.billed_gpus
            and a.warm_gpus == b.warm_gpus and a.kept == b.kept)


def check_one_price_per_product(pools: Sequence[PoolSpec]) -> None:
    """Refuse pools of one GPU product at different prices: the cost accounting prices a
    product's GPU-hours at one price, so either pool's would bill the other's GPUs."""
    first: dict[str, PoolSpec] = {}
    for pool in pools:
        seen = first.setdefault(pool.product, pool)
        if seen.price_per_gpu_hour != pool.price_per_gpu_hour:
            raise PriceError(
                f"pools[{seen.name}].price_per_gpu_hour ({seen.price_per_gpu_hour:g}) and "
                f"pools[{pool.name}].price_per_gpu_hour ({pool.price_per_gpu_hour:g}) differ, "
                f"but both pools are {pool.product}: GPU-hours are priced per product, one "
                f"pool per product")


def unapplied_price_notes(pools: Sequence[PoolSpec], in_force: PriceTable) -> tuple[str, ...]:
    """One ``note:`` line per configured pool whose price differs from its product's price in
    force in the store: a reader given ``--config`` (``cost export``, ``status``) bills at the
    store's, as a price takes effect only once ``serve`` or ``demo`` applies it, and says so
    rather than leave the configured price silently unused."""
    notes = []
    for pool in pools:
        stored = in_force.price_of(pool.product)
        if abs(stored.usd_per_gpu_hour - pool.price_per_gpu_hour) > 1e-9:
            notes.append(
                f"note: --config prices pool {pool.name} ({pool.product}) at "
                f"${pool.price_per_gpu_hour:g}/GPU-h, the store's price in force is "
                f"${stored.usd_per_gpu_hour:g} ({stored.source}): the store's is used; a price "
                "takes effect once `headroom serve` or `headroom demo` applies it")
    return tuple(notes)
