"""Seeded synthetic traffic: daily and weekly shape, bursts and noise per model (pure functions).

The same (model, seed, time) always gives the same rate, so a resumed demo continues the same day.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class TrafficShape:
    model: str
    base_rps: float  # mean rate on a weekday
    peak_hour_utc: float  # hour of the daily peak
    daily_amplitude: float  # 0..1, share of base that swings over the day
    weekend_factor: float  # weekend rate / weekday rate
    bursts_per_day: float
    burst_factor: float  # peak multiplier of a burst
    noise_sigma: float  # lognormal sigma of per-minute noise


def _unit(*parts: object) -> float:
    """A deterministic uniform number in [0, 1) from the parts."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _bursts_of_day(shape: TrafficShape, seed: int, day: int) -> list[tuple[float, float, float]]:
    """(start_s, duration_s, factor) of the bursts on one day, from a seeded generator."""
    rng = random.Random(f"{seed}/{shape.model}/{day}")
    count = sum(1 for _ in range(8) if rng.random() < shape.bursts_per_day / 8)
    return [(rng.uniform(0, DAY_S), rng.uniform(600, 1800),
             1 + (shape.burst_factor - 1) * rng.uniform(0.5, 1.0)) for _ in range(count)]


def rate_rps(shape: TrafficShape, seed: int, at: datetime) -> float:
    epoch_s = at.timestamp()
    day = math.floor(epoch_s / DAY_S)
    second_of_day = epoch_s - day * DAY_S
    hour = second_of_day / 3600
    daily = 1 + shape.daily_amplitude * math.cos(2 * math.pi * (hour - shape.peak_hour_utc) / 24)
    weekly = shape.weekend_factor if at.weekday() >= 5 else 1.0
    burst = 1.0
    for d in (day - 1, day):
        for start_s, duration_s, factor in _bursts_of_day(shape, seed, d):
            offset = epoch_s - (d * DAY_S + start_s)
            if 0 <= offset < duration_s:
                burst = max(burst, 1 + (factor - 1) * math.sin(math.pi * offset / duration_s))
    minute = math.floor(epoch_s / 60)
    u = min(max(_unit(seed, shape.model, minute), 1e-9), 1 - 1e-9)
    noise = math.exp(shape.noise_sigma * _normal_from_unit(u))
    return max(0.0, shape.base_rps * daily * weekly * burst * noise)


def _normal_from_unit(u: float) -> float:
    """Inverse-CDF approximation of a standard normal (Acklam's rational fit is overkill here)."""
    return math.sqrt(2) * _erfinv(2 * u - 1)


def _erfinv(x: float) -> float:
    a = 0.147
    ln = math.log(1 - x * x)
    first = 2 / (math.pi * a) + ln / 2
    return math.copysign(math.sqrt(math.sqrt(first * first - ln / a) - first), x)


def history(
    shapes: list[TrafficShape], seed: int, until_at: datetime, span_s: int, step_s: int,
    stored_until: Mapping[str, datetime | None] | None = None,
) -> list[tuple[str, datetime, float]]:
    """Rows (model, at, rps) for ``span_s`` before ``until_at`` at ``step_s``; with
    ``stored_until``, only a model's rows after the last one a store holds already."""
    start_at = until_at - timedelta(seconds=span_s)
    steps = span_s // step_s
    stored = stored_until or {}
    return [(shape.model, at, rate_rps(shape, seed, at))
            for i in range(steps)
            for at in [start_at + timedelta(seconds=i * step_s)]
            for shape in shapes
            if (last_at := stored.get(shape.model)) is None or at > last_at]
