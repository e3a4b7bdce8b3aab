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

from controlplane.domain.cost import GpuPrice, PriceError, PriceTable
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

    @staticmethod
    def fixed(table: PriceTable) -> PriceHistory:
        """``table`` at every instant (e.g. a what-if price table)."""
        return PriceHistory(table)


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
