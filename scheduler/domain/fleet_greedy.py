"""Greedy fallback of PlanFleet: best throughput per compute slice per model, then
first-fit-decreasing into GPUs with a valid layout. Used when no solver answers in time."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler.domain.fleet_layout import Packing
from scheduler.domain.fleet_options import WHOLE, PoolInfo, SegmentOption


def pack_greedy(pools: Sequence[PoolInfo], options: dict[str, list[SegmentOption]],
                rates: dict[str, float]) -> Packing:
    chosen: dict[str, tuple[SegmentOption, int]] = {}
    for model in sorted(options):
        def value(o: SegmentOption) -> tuple[float, float, int, int]:
            info = pools[o.pool]
            per_slice = o.point.throughput_rps / info.slices(o.size)
            price = info.pool.price_per_gpu_hour * info.slices(o.size)
            return (-per_slice, price, o.pool, o.size)

        best = min(options[model], key=value)
        chosen[model] = (best, max(1, math.ceil(rates[model] / best.point.throughput_rps - 1e-9)))
    bins: list[tuple[int, list[int]]] = []  # (pool, sizes)
    unplaced: set[str] = set()
    order = sorted(chosen, key=lambda m: (-pools[chosen[m][0].pool].slices(chosen[m][0].size)
                                          * chosen[m][1], m))
    for model in order:
        opt, count = chosen[model]
        trial = [(p, list(sizes)) for p, sizes in bins]
        if _place_all(pools, trial, opt, count):
            bins = trial
        else:
            unplaced.add(model)
    layouts: dict[tuple[int, tuple[int, ...]], int] = {}
    for pool, sizes in bins:
        key = (pool, tuple(sorted(sizes, reverse=True)))
        layouts[key] = layouts.get(key, 0) + 1
    return Packing(tuple((p, lay, c) for (p, lay), c in sorted(layouts.items())), (),
                   tuple(chosen[m] for m in sorted(chosen) if m not in unplaced),
                   frozenset(unplaced))


def _place_all(pools: Sequence[PoolInfo], bins: list[tuple[int, list[int]]],
               opt: SegmentOption, count: int) -> bool:
    info = pools[opt.pool]
    for _ in range(count):
        for pool, sizes in bins:
            if pool == opt.pool and opt.size != WHOLE and WHOLE not in sizes:
                candidate = tuple(sorted([*sizes, opt.size], reverse=True))
                if candidate in info.layouts:
                    sizes.append(opt.size)
                    break
        else:
            if sum(1 for p, _ in bins if p == opt.pool) >= info.pool.max_gpus:
                return False
            bins.append((opt.pool, [opt.size]))
    return True
