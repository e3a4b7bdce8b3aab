"""Warm-pool sizing: GPUs kept loaded-but-idle to absorb demand that can arrive before a cold
start completes (DESIGN.md "Warm pool ladder").

For each model the plan serves ``rate_rps`` with some slack. During one cold start of
``cold_start_s`` the rate can rise; we size that rise from the upper quantile of a random-walk
model of relative demand changes: rise = rate x z_q x volatility x sqrt(cold_start / 60 s).
What the slack does not cover must be served by warm GPUs, converted with the throughput per
GPU of the model's segments on that pool. Rounded up per pool and capped by the pool's room.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.domain.fleet_types import WarmPool

#: z-score of the 90th percentile of a normal distribution.
Z_P90 = 1.2816
#: Relative standard deviation of the demand change over one minute (field default).
VOLATILITY_PER_MINUTE = 0.15


@dataclass(frozen=True, slots=True)
class ServedModel:
    """How the plan serves one model on one pool."""

    model: str
    pool: str
    rate_rps: float
    capacity_rps: float  # sum of the segments' throughput
    rps_per_gpu: float  # throughput one GPU of this pool gives the model
    cold_start_s: float


def demand_rise_rps(rate_rps: float, cold_start_s: float, z: float = Z_P90,
                    volatility_per_minute: float = VOLATILITY_PER_MINUTE) -> float:
    """Upper-quantile rise of the demand within one cold start."""
    if cold_start_s <= 0 or rate_rps <= 0:
        return 0.0
    return rate_rps * z * volatility_per_minute * math.sqrt(cold_start_s / 60.0)


def size_warm_pools(served: Sequence[ServedModel], room_by_pool: dict[str, int]) -> list[WarmPool]:
    """Warm GPUs per pool (only pools that need some), with the reason."""
    need: dict[str, float] = {}
    why: dict[str, list[str]] = {}
    for s in served:
        # huge inputs: the rise may be inf, the capacity too (then the share is nan: covered)
        rise = demand_rise_rps(s.rate_rps, s.cold_start_s)
        slack = max(0.0, s.capacity_rps - s.rate_rps)
        if not rise > slack or s.rps_per_gpu <= 0:
            continue
        uncovered = rise - slack
        need[s.pool] = need.get(s.pool, 0.0) + uncovered / s.rps_per_gpu
        why.setdefault(s.pool, []).append(
            f"{s.model} +{uncovered:.1f} rps over a {s.cold_start_s:.0f} s cold start")
    pools: list[WarmPool] = []
    for pool in sorted(need):
        room = max(0, room_by_pool.get(pool, 0))
        wanted = need[pool] - 1e-9
        # a need at or above the room (inf too: huge rates and cold starts) is the room
        gpus = math.ceil(wanted) if wanted < room else room
        if gpus <= 0:
            continue
        reason = "p90_demand_rise_during_cold_start: " + "; ".join(why[pool])
        if wanted > gpus:
            reason += " (capped by pool max_gpus)"
        pools.append(WarmPool(pool, gpus, reason))
    return pools
