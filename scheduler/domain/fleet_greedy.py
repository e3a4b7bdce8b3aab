"""Greedy fallback of PlanFleet: best throughput per compute slice per model, then
first-fit-decreasing into GPUs with a valid layout. Used when no solver answers in time.

Like the solver, it stays close to the previous plan: with ``keep_min_fill`` given, a previous
GPU whose segments still serve what the models want (the same pool, model, size and shape) is
kept with its layout when those segments fill at least that share of its compute slices (the
fullest first); its other instances take segments of their size before any new GPU is opened.
PlanFleet packs with several fills and keeps the cheapest packing, then the one that re-lays
out the fewest GPUs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from scheduler.domain.fleet_layout import Packing, PriorGpu, holdings
from scheduler.domain.fleet_options import WHOLE, PoolInfo, SegmentOption

#: The fills PlanFleet tries (None: ignore the previous plan, pack from scratch).
KEEP_MIN_FILLS: tuple[float | None, ...] = (None, 1.0, 0.85, 0.7, 0.5, 0.3, 0.0)


def pack_greedy(pools: Sequence[PoolInfo], options: dict[str, list[SegmentOption]],
                rates: dict[str, float], priors: Sequence[PriorGpu] = (),
                keep_min_fill: float | None = None) -> Packing:
    chosen = _choose(pools, options, rates)
    need = {model: count for model, (_, count) in chosen.items()}
    kept: list[int] = []
    free: Counter[tuple[int, int]] = Counter()  # (pool, size) -> empty instances of kept GPUs
    if keep_min_fill is not None:
        kept, free = _keep(pools, priors, chosen, need, keep_min_fill)
    bins = _Bins(pools, Counter(priors[k].pool for k in kept), free)
    unplaced: set[str] = set()
    order = sorted(chosen, key=lambda m: (-pools[chosen[m][0].pool].slices(chosen[m][0].size)
                                          * chosen[m][1], m))
    for model in order:
        if not bins.place_all(chosen[model][0], need[model]):
            unplaced.add(model)
    layouts: dict[tuple[int, tuple[int, ...]], int] = {}
    for pool, sizes in zip(bins.pool_of, bins.sizes, strict=True):
        key = (pool, tuple(sorted(sizes, reverse=True)))
        layouts[key] = layouts.get(key, 0) + 1
    return Packing(tuple((p, lay, c) for (p, lay), c in sorted(layouts.items())),
                   tuple(priors[k].gpu_id for k in sorted(kept)),
                   tuple(chosen[m] for m in sorted(chosen) if m not in unplaced),
                   frozenset(unplaced))


def _choose(pools: Sequence[PoolInfo], options: dict[str, list[SegmentOption]],
            rates: dict[str, float]) -> dict[str, tuple[SegmentOption, int]]:
    """Per model: the option with the best throughput per compute slice, and how many; a
    time-slice instead where its segments take fewer of a GPU's slices in all (it serves less
    per slice, for the context switches, but a model needing a fraction of a GPU wastes less)."""
    chosen: dict[str, tuple[SegmentOption, int]] = {}
    for model in sorted(options):
        rate = rates[model]
        whole = [o for o in options[model] if o.size >= WHOLE]
        best = min(whole, key=lambda o: _value(pools, o), default=None)
        sliced = min((o for o in options[model] if o.size < WHOLE),
                     key=lambda o: _total(pools, o, rate), default=None)
        if best is None or (sliced is not None
                            and _total(pools, sliced, rate) < _total(pools, best, rate)):
            best = sliced
        assert best is not None
        chosen[model] = (best, best.segments_for(rate))
    return chosen


def _value(pools: Sequence[PoolInfo], o: SegmentOption) -> tuple[float, float, int, int]:
    info = pools[o.pool]
    per_slice = o.point.throughput_rps / info.slices(o.size)
    price = info.pool.price_per_gpu_hour * info.slices(o.size)
    return (-per_slice, price, o.pool, o.size)


def _total(pools: Sequence[PoolInfo], o: SegmentOption, rate: float
           ) -> tuple[float, tuple[float, float, int, int]]:
    return pools[o.pool].slices(o.size) * o.segments_for(rate), _value(pools, o)


def _keep(pools: Sequence[PoolInfo], priors: Sequence[PriorGpu],
          chosen: dict[str, tuple[SegmentOption, int]], need: dict[str, int],
          min_fill: float) -> tuple[list[int], Counter[tuple[int, int]]]:
    """The previous GPUs to keep (indexes into ``priors``) and their empty instances; takes
    the segments they keep off ``need``."""
    models = sorted(chosen)
    options = [chosen[m][0] for m in models]
    serving: dict[int, list[tuple[SegmentOption, int]]] = {}
    for opt, counts in zip(options, holdings(priors, options), strict=True):
        for k, count in counts.items():
            serving.setdefault(k, []).append((opt, count))

    def fill(k: int) -> float:
        info = pools[priors[k].pool]
        used = sum(info.slices(o.size) * min(c, need[o.model]) for o, c in serving[k])
        return used / sum(info.slices(size) for size in priors[k].sizes)

    kept: list[int] = []
    free: Counter[tuple[int, int]] = Counter()
    held: Counter[int] = Counter()
    for k in sorted(serving, key=lambda k: (-fill(k), priors[k].gpu_id)):
        prior = priors[k]
        share = fill(k)
        if share <= 0 or share < min_fill or held[prior.pool] >= pools[prior.pool].pool.max_gpus:
            continue
        kept.append(k)
        held[prior.pool] += 1
        empty = Counter(prior.sizes)
        for opt, count in serving[k]:
            taken = min(count, need[opt.model])
            need[opt.model] -= taken
            empty[opt.size] -= taken
        for size, count in empty.items():
            free[(prior.pool, size)] += count
    return kept, free


class _Bins:
    """The new GPUs of a greedy packing (first fit, in the order they were opened) and the
    empty instances of the kept ones; a model's segments go in all together or not at all."""

    def __init__(self, pools: Sequence[PoolInfo], kept: Counter[int],
                 free: Counter[tuple[int, int]]) -> None:
        self.pools = pools
        self.kept = kept  # previous GPUs kept, per pool
        self.free = free
        self.pool_of: list[int] = []
        self.sizes: list[list[int]] = []
        self._opened: Counter[int] = Counter()  # new GPUs per pool
        self._open: dict[int, list[int]] = {}  # per pool: bins that may take an instance

    def place_all(self, opt: SegmentOption, count: int) -> bool:
        opened, free = len(self.sizes), Counter(self.free)
        grown: list[int] = []
        for _ in range(count):
            where = self._place(opt)
            if where is None:
                self._undo(opt.pool, opt.size, opened, grown, free)
                return False
            if where >= 0:
                grown.append(where)
        return True

    def _place(self, opt: SegmentOption) -> int | None:
        """Place one segment: -1 on a kept GPU, else the bin; None when the pool is full."""
        info = self.pools[opt.pool]
        if self.free[(opt.pool, opt.size)] > 0:
            self.free[(opt.pool, opt.size)] -= 1
            return -1
        open_bins = self._open.setdefault(opt.pool, [])
        for i in open_bins:
            if info.can_take(self.sizes[i], opt.size):
                self.sizes[i].append(opt.size)
                self.sizes[i].sort(reverse=True)
                if info.is_full(self.sizes[i]):
                    open_bins.remove(i)
                return i
        if self.kept[opt.pool] + self._opened[opt.pool] >= info.pool.max_gpus:
            return None
        self._opened[opt.pool] += 1
        self.pool_of.append(opt.pool)
        self.sizes.append([opt.size])
        if not info.is_full(self.sizes[-1]):
            open_bins.append(len(self.sizes) - 1)
        return len(self.sizes) - 1

    def _undo(self, pool: int, size: int, opened: int, grown: list[int],
              free: Counter[tuple[int, int]]) -> None:
        for i in reversed(grown):
            if i < opened:
                self.sizes[i].remove(size)
        del self.pool_of[opened:], self.sizes[opened:]
        self._opened = Counter(self.pool_of)
        self.free = free
        info = self.pools[pool]
        self._open[pool] = [i for i, (p, sizes) in enumerate(zip(self.pool_of, self.sizes,
                                                                  strict=True))
                            if p == pool and not info.is_full(sizes)]
