"""Durations and demand as distributions (pure).

``Durations`` holds a duration distribution as sorted samples: an empirical one (e.g. the GenTD26
base-model load latencies, tri-modal at ~3 s / ~22 s / ~39 s) or a lognormal through p50 and p90,
stored as a fine quantile grid so both kinds behave the same. Drawing takes a uniform number from
the caller, so the caller owns the random generator (and the seed).

``expected_shortfall`` is E[(D - c)+] for demand D lognormal through p50/p90: the rps a capacity of
``c`` is expected to miss, used to trade idle cost against shortfall.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

_Z90 = NormalDist().inv_cdf(0.9)
_GRID = 199


def sorted_quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted, non-empty ``ordered`` by linear interpolation between
    order statistics (numpy's default method)."""
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True, slots=True)
class Durations:
    """A distribution of durations in seconds, as sorted samples."""

    samples_s: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.samples_s:
            raise ValueError("a duration distribution needs at least one sample")
        if any(not math.isfinite(s) or s < 0 for s in self.samples_s):
            raise ValueError("durations must be finite and >= 0 s")
        if any(b < a for a, b in zip(self.samples_s, self.samples_s[1:], strict=False)):
            raise ValueError("samples_s must be sorted")

    @classmethod
    def of(cls, samples_s: Iterable[float]) -> Durations:
        return cls(tuple(sorted(samples_s)))

    @classmethod
    def fixed(cls, seconds: float) -> Durations:
        return cls((float(seconds),))

    @classmethod
    def lognormal(cls, p50_s: float, p90_s: float) -> Durations:
        """A lognormal through p50 and p90 (a fixed value when they are equal)."""
        if p50_s <= 0 or p90_s < p50_s:
            raise ValueError(f"need 0 < p50_s <= p90_s, got p50_s={p50_s}, p90_s={p90_s}")
        sigma = math.log(p90_s / p50_s) / _Z90
        normal = NormalDist()
        return cls(tuple(p50_s * math.exp(sigma * normal.inv_cdf((i + 0.5) / _GRID))
                         for i in range(_GRID)))

    def quantile(self, q: float) -> float:
        """Linear interpolation between order statistics."""
        if not 0 <= q <= 1:
            raise ValueError(f"quantile must be in [0, 1], got {q}")
        return sorted_quantile(self.samples_s, q)

    def draw(self, u: float) -> float:
        """The duration at uniform number ``u`` in [0, 1) (inverse-CDF sampling)."""
        return self.quantile(min(max(u, 0.0), 1.0))

    def split(self, threshold_s: float) -> tuple[Durations | None, Durations | None]:
        """(samples <= threshold, samples > threshold); either may be empty (None)."""
        cut = bisect.bisect_right(self.samples_s, threshold_s)
        fast, slow = self.samples_s[:cut], self.samples_s[cut:]
        return (Durations(fast) if fast else None, Durations(slow) if slow else None)

    def mean(self) -> float:
        return sum(self.samples_s) / len(self.samples_s)


def lognormal_sigma(p50: float, p90: float) -> float:
    """Log-scale spread of a lognormal through p50 and p90 (0 when they do not spread)."""
    if p50 <= 0 or p90 <= p50:
        return 0.0
    return math.log(p90 / p50) / _Z90


def expected_shortfall(p50: float, p90: float, capacity: float) -> float:
    """E[(D - capacity)+] for D lognormal through p50 and p90 (D = p50 when they do not spread)."""
    capacity = max(0.0, capacity)
    sigma = lognormal_sigma(p50, p90)
    if sigma == 0.0:
        return max(0.0, max(p50, p90) - capacity)
    if capacity == 0:
        return p50 * math.exp(sigma * sigma / 2)
    mu = math.log(p50)
    d2 = (mu - math.log(capacity)) / sigma
    phi = NormalDist().cdf
    return math.exp(mu + sigma * sigma / 2) * phi(d2 + sigma) - capacity * phi(d2)
