"""Cost model (pure): GPU prices, each GPU's price split by slice share to models and tenants,
idle vs warm-pool vs serving dollars, accrual over time, daily totals and cost per 1M requests.

Convention (stated in the UI): a MIG slice costs ``compute slices / total compute slices`` of its
GPU (g/7 on A100/H100/H200-class parts, g/4 on 4-slice parts). Segments without a MIG slice (a
whole GPU, MPS shares, time-slices) split what is left of the GPU evenly, the way the device plugin
splits MPS and time-sliced GPUs evenly. Any part of a billed GPU that no segment holds is idle,
unless the plan holds that GPU as warm pool.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache

DEFAULT_COMPUTE_SLICES = 7
COMPUTE_SLICES: Mapping[str, int] = {"A30-24GB": 4, "A30": 4, "RTX-PRO-6000": 4}


class CostCategory(StrEnum):
    SERVING = "serving"
    WARM = "warm"
    IDLE = "idle"


IDLE_MODEL = "__idle__"  # OpenCost's name for unallocated capacity
WARM_MODEL = "__warm__"


class PriceError(ValueError):
    """A price that cannot be used; the message names the product and the field."""


@dataclass(frozen=True, slots=True)
class GpuPrice:
    product: str
    usd_per_gpu_hour: float
    source: str
    as_of: str

    def __post_init__(self) -> None:
        if not self.product:
            raise PriceError("gpu price: product must not be empty")
        if not math.isfinite(self.usd_per_gpu_hour) or self.usd_per_gpu_hour < 0:
            raise PriceError(f"gpu price {self.product}: usd_per_gpu_hour must be a finite "
                             f"number >= 0, got {self.usd_per_gpu_hour!r}")


_REF = "REFERENCE.md §10.1"
DEFAULT_PRICES: tuple[GpuPrice, ...] = (
    GpuPrice("T4", 0.53, f"{_REF}: AWS g4dn.xlarge on-demand (from memory, re-check)", "2024-25"),
    GpuPrice("A10G", 1.006, f"{_REF}: AWS g5.xlarge on-demand", "2026"),
    GpuPrice("L4", 0.80, f"{_REF}: AWS g6.xlarge on-demand (from memory, re-check)", "2024-25"),
    GpuPrice("L40S", 1.86, f"{_REF}: AWS g6e.xlarge on-demand (from memory, re-check)", "2024-25"),
    GpuPrice("A100-40GB", 4.10, f"{_REF}: AWS p4d.24xlarge / 8, before the 2025 cut", "2024-25"),
    GpuPrice("A100-80GB", 5.12, f"{_REF}: AWS p4de.24xlarge / 8 on-demand", "2024-25"),
    GpuPrice("H100-80GB", 6.88, f"{_REF}: AWS p5.48xlarge / 8 after the June 2025 cut", "2025-06"),
    GpuPrice("H200-141GB", 5.408, f"{_REF}: AWS EC2 Capacity Blocks (p5e)", "2025"),
)
FALLBACK_USD_PER_GPU_HOUR = 0.95
FALLBACK_SOURCE = "OpenCost custom-pricing default GPU price (REFERENCE.md §10.2)"


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices per GPU product; later entries override earlier ones (defaults < configured)."""

    prices: tuple[GpuPrice, ...] = DEFAULT_PRICES

    def with_overrides(self, overrides: Iterable[GpuPrice]) -> PriceTable:
        merged = {p.product: p for p in self.prices}
        merged.update({p.product: p for p in overrides})
        return PriceTable(tuple(merged.values()))

    def price_of(self, product: str) -> GpuPrice:
        """The product's price, or OpenCost's default GPU price marked as a fallback."""
        for price in reversed(self.prices):
            if price.product == product:
                return price
        return GpuPrice(product, FALLBACK_USD_PER_GPU_HOUR, FALLBACK_SOURCE, "2024-10")


@dataclass(frozen=True, slots=True)
class SliceUse:
    """One placed segment (replica) on a GPU; ``compute_slices`` 0 = no MIG slice."""

    model: str
    tenant: str
    compute_slices: int = 0


@dataclass(frozen=True, slots=True)
class GpuUsage:
    """What a GPU holds; ``gpus`` counts identical GPUs (same product and layout)."""

    product: str
    segments: tuple[SliceUse, ...]
    gpus: int = 1


def total_compute_slices(product: str) -> int:
    return COMPUTE_SLICES.get(product, DEFAULT_COMPUTE_SLICES)


def slice_shares(segments: Sequence[SliceUse], total_slices: int) -> tuple[float, ...]:
    """Fraction of one GPU each segment holds. Shares are >= 0 and sum to at most 1: MIG slices
    at g/total (scaled down if an invalid layout claims more than the GPU), the rest split evenly
    among the segments without a MIG slice."""
    mig = [max(0, s.compute_slices) / total_slices for s in segments]
    mig_sum = sum(mig)
    scale = 1.0 / mig_sum if mig_sum > 1.0 else 1.0
    whole = sum(1 for s in segments if s.compute_slices <= 0)
    rest_each = max(0.0, 1.0 - mig_sum * scale) / whole if whole else 0.0
    return tuple(m * scale if s.compute_slices > 0 else rest_each
                 for s, m in zip(segments, mig, strict=True))


@dataclass(frozen=True, slots=True)
class CostLine:
    """Dollars per hour of one (category, product, tenant, model) at one instant."""

    category: CostCategory
    product: str
    tenant: str
    model: str
    gpus: float  # GPU-equivalents
    usd_per_hour: float


@dataclass(frozen=True, slots=True)
class KeptUse:
    """GPU-equivalents of ``product`` that a model's replicas take beyond the plan's placement:
    the replicas the guards keep over its target (a scale-down held back) or all of a model
    held while unplaced. They run, so they are the model's, not idle."""

    model: str
    tenant: str
    product: str
    gpus: float


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """The fleet at one instant: GPUs billed and warm per product, what the plan placed, and
    the replicas it kept beyond the placement (none on plans stored before they were)."""

    at: datetime
    billed_gpus: Mapping[str, int]
    warm_gpus: Mapping[str, int]
    placed: tuple[GpuUsage, ...]
    kept: tuple[KeptUse, ...] = ()


_LineKey = tuple[CostCategory, str, str, str]


def _merged(totals: Mapping[_LineKey, list[float]]) -> tuple[CostLine, ...]:
    return tuple(CostLine(*key, acc[0], acc[1]) for key, acc in sorted(totals.items()))


@lru_cache(maxsize=65536)
def _one_gpu(product: str, segments: tuple[SliceUse, ...], price: GpuPrice
             ) -> tuple[tuple[_LineKey, float], ...]:
    """(line key, share of the GPU) for one GPU of a layout; memoised, as fleets repeat a few
    layouts on many GPUs and across many snapshots."""
    shares = slice_shares(segments, total_compute_slices(product))
    out = [((CostCategory.SERVING, product, seg.tenant, seg.model), share)
           for seg, share in zip(segments, shares, strict=True)]
    idle = max(0.0, 1.0 - sum(shares))
    if idle > 1e-12:
        out.append(((CostCategory.IDLE, product, IDLE_MODEL, IDLE_MODEL), idle))
    return tuple(out)


def _add(totals: dict[_LineKey, list[float]], usage: GpuUsage, price: GpuPrice,
         factor: float = 1.0) -> None:
    gpus = usage.gpus * factor
    for key, share in _one_gpu(usage.product, usage.segments, price):
        acc = totals.setdefault(key, [0.0, 0.0])
        acc[0] += share * gpus
        acc[1] += share * gpus * price.usd_per_gpu_hour


def split_gpu(usage: GpuUsage, price: GpuPrice) -> tuple[CostLine, ...]:
    """The price of ``usage.gpus`` identical GPUs split into serving lines and the idle rest."""
    totals: dict[_LineKey, list[float]] = {}
    _add(totals, usage, price)
    return _merged(totals)


def fleet_cost_rate(snapshot: FleetSnapshot, prices: PriceTable) -> tuple[CostLine, ...]:
    """Every billed GPU's $/h, split into serving (by slice share), warm pool and idle, one line
    per (category, product, tenant, model).

    Lines always sum to the bill (billed GPUs x price). The plan describes the desired fleet,
    so during a scale-up it may place more GPUs of a product than are billed yet: the billed
    GPUs are then split in the plan's proportions. Warm GPUs come out of the billed GPUs the plan
    leaves unplaced; whatever is neither placed nor warm is idle. Replicas kept beyond the
    placement (``snapshot.kept``) run on GPUs the plan does not count: they are billed to their
    model out of the product's idle GPUs (whole GPUs left unplaced and the free part of placed
    ones), then out of its warm GPUs, never more than those (``kept_from_idle``)."""
    placed_count: dict[str, int] = defaultdict(int)
    for usage in snapshot.placed:
        placed_count[usage.product] += usage.gpus
    factor: dict[str, float] = {}
    totals: dict[_LineKey, list[float]] = {}
    products = set(snapshot.billed_gpus) | set(placed_count) | set(snapshot.warm_gpus)
    for product in sorted(products):
        billed = max(0, snapshot.billed_gpus.get(product, 0))
        placed = placed_count[product]
        factor[product] = min(1.0, billed / placed) if placed else 1.0
        unplaced = max(0, billed - placed)
        warm = min(unplaced, max(0, snapshot.warm_gpus.get(product, 0)))
        rate = prices.price_of(product).usd_per_gpu_hour
        if warm:
            totals[(CostCategory.WARM, product, WARM_MODEL, WARM_MODEL)] = [warm, warm * rate]
        if unplaced - warm:
            idle = [float(unplaced - warm), (unplaced - warm) * rate]
            totals[(CostCategory.IDLE, product, IDLE_MODEL, IDLE_MODEL)] = idle
    price_of = {p: prices.price_of(p) for p in {u.product for u in snapshot.placed}}
    for usage in snapshot.placed:
        _add(totals, usage, price_of[usage.product], factor[usage.product])
    kept_from_idle(totals, snapshot.kept, prices)
    return _merged(totals)


def kept_from_idle(totals: dict[_LineKey, list[float]], kept: Sequence[KeptUse],
                   prices: PriceTable) -> None:
    """Move the GPUs of ``kept`` replicas from their product's idle line, then its warm line,
    to serving lines of their models (in place): in proportion to each model's GPUs when the
    product has fewer idle and warm GPUs than they take, so the lines still sum to the bill."""
    wanted: dict[str, float] = defaultdict(float)
    for use in kept:
        wanted[use.product] += max(0.0, use.gpus)
    for product, want in sorted(wanted.items()):
        rate = prices.price_of(product).usd_per_gpu_hour
        sources = [key for key in ((CostCategory.IDLE, product, IDLE_MODEL, IDLE_MODEL),
                                   (CostCategory.WARM, product, WARM_MODEL, WARM_MODEL))
                   if key in totals]
        left = take = min(want, sum(totals[key][0] for key in sources))
        for key in sources:
            moved = min(left, totals[key][0])
            left -= moved
            remaining = totals[key][0] - moved
            if remaining > 1e-9:
                totals[key] = [remaining, remaining * rate]
            else:
                del totals[key]
        for use in kept:
            if use.product == product and use.gpus > 0 and take > 0:
                gpus = use.gpus * take / want
                acc = totals.setdefault((CostCategory.SERVING, product, use.tenant, use.model),
                                        [0.0, 0.0])
                acc[0] += gpus
                acc[1] += gpus * rate


def attribute_warm(total_warm: int, unplaced: Mapping[str, int]) -> dict[str, int]:
    """Spread a plan's warm-pool GPU count over products with unplaced GPUs, in proportion to
    them (largest remainder; ties by product name). Used when only the total is recorded (a plan
    saved before warm GPUs were stored per product, store migration 0020)."""
    capacity = {p: n for p, n in unplaced.items() if n > 0}
    pool = sum(capacity.values())
    if total_warm <= 0 or pool <= 0:
        return {}
    take = min(total_warm, pool)
    exact = {p: take * n / pool for p, n in capacity.items()}
    out = {p: math.floor(x) for p, x in exact.items()}
    order = sorted(capacity, key=lambda p: (-(exact[p] - out[p]), p))
    for product in order[: take - sum(out.values())]:
        out[product] += 1
    return {p: n for p, n in out.items() if n}


def billed_rate(snapshot: FleetSnapshot, prices: PriceTable) -> float:
    """$/h of the GPUs the fleet pays for (what ``fleet_cost_rate`` lines sum to)."""
    return sum(prices.price_of(p).usd_per_gpu_hour * max(0, n)
               for p, n in snapshot.billed_gpus.items())


@dataclass(frozen=True, slots=True)
class CostAccrual:
    """Dollars and GPU-hours of one cost line accrued within one UTC day."""

    day: str  # YYYY-MM-DD (UTC)
    start_at: datetime
    end_at: datetime
    category: CostCategory
    product: str
    tenant: str
    model: str
    gpu_hours: float
    usd: float


def window_bounds(first_at: datetime, last_at: datetime, length: timedelta,
                  until_at: datetime | None = None) -> tuple[datetime, datetime]:
    """[since, until) of a cost window ``length`` long ending at ``until_at`` (default and
    latest: the last tick, ``last_at``) and starting no earlier than the first tick
    (``first_at``): nothing is recorded outside the store's ticks. The dashboard's Cost page and
    ``headroom cost export`` both take their window from here, so the same window counts the
    same requests: the load observed at the last tick itself is past the window's end."""
    end_at = last_at if until_at is None else min(last_at, until_at)
    return max(first_at, end_at - length), end_at


def _day_pieces(start_at: datetime, end_at: datetime) -> Iterable[tuple[datetime, datetime]]:
    cursor = start_at
    while cursor < end_at:
        midnight = (cursor + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        piece_end = min(end_at, midnight)
        yield cursor, piece_end
        cursor = piece_end


def accrue(samples: Sequence[tuple[datetime, Sequence[CostLine]]],
           until_at: datetime) -> tuple[CostAccrual, ...]:
    """Integrate step-wise rates: each sample's lines hold until the next sample (the last one
    until ``until_at``); results are split at UTC midnight and summed per day and line."""
    ordered = sorted(samples, key=lambda s: s[0])
    totals: dict[tuple[str, CostCategory, str, str, str], list[float]] = {}
    spans: dict[str, list[datetime]] = {}
    for i, (at, lines) in enumerate(ordered):
        end_at = ordered[i + 1][0] if i + 1 < len(ordered) else until_at
        for piece_start, piece_end in _day_pieces(at, end_at):
            day = piece_start.date().isoformat()
            span = spans.setdefault(day, [piece_start, piece_end])
            span[0], span[1] = min(span[0], piece_start), max(span[1], piece_end)
            hours = (piece_end - piece_start).total_seconds() / 3600
            for line in lines:
                acc = totals.setdefault((day, line.category, line.product, line.tenant,
                                         line.model), [0.0, 0.0])
                acc[0] += line.gpus * hours
                acc[1] += line.usd_per_hour * hours
    return tuple(CostAccrual(day, spans[day][0], spans[day][1], category, product, tenant, model,
                             acc[0], acc[1])
                 for (day, category, product, tenant, model), acc in sorted(totals.items()))


def cost_per_million(usd: float, requests: float) -> float | None:
    """Dollars per 1M requests, or None when nothing was served."""
    return usd / requests * 1e6 if requests > 0 else None
