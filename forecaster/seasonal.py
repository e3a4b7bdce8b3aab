"""A fitted seasonal shape as plain numbers: Fourier terms (as Prophet builds them) x coefficients.

Prophet's additive seasonal component is ``fourier(t) @ beta * y_scale`` where ``t`` is days since
the Unix epoch; storing ``beta`` and ``y_scale`` lets the level model evaluate the shape at any time
without Prophet (and lets the job persist it in a few hundred bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class SeasonalCurve:
    """``terms`` are (period in days, Fourier order) in Prophet's column order."""

    terms: tuple[tuple[float, int], ...]
    beta: tuple[float, ...]
    y_scale: float

    def __post_init__(self) -> None:
        width = sum(2 * order for _, order in self.terms)
        if width != len(self.beta):
            raise ValueError(f"seasonal curve: {len(self.beta)} coefficients for {width} terms")

    def evaluate(self, epoch_s: FloatArray) -> FloatArray:
        """Seasonal component (in the series' units) at the given Unix times."""
        # row by row (not a BLAS product): a time's value never depends on the other times
        # evaluated with it, so cached spans and single points agree bit for bit
        terms = fourier_matrix(epoch_s, self.terms) * np.asarray(self.beta)
        return np.asarray(terms.sum(axis=1) * self.y_scale, dtype=np.float64)

    def to_json(self) -> dict[str, object]:
        return {"terms": [list(t) for t in self.terms], "beta": list(self.beta),
                "y_scale": self.y_scale}

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> SeasonalCurve:
        terms = doc["terms"]
        beta = doc["beta"]
        if not isinstance(terms, list) or not isinstance(beta, list):
            raise ValueError("seasonal curve: 'terms' and 'beta' must be lists")
        return cls(terms=tuple((float(p), int(o)) for p, o in terms),
                   beta=tuple(float(b) for b in beta), y_scale=float(str(doc["y_scale"])))


def fourier_matrix(epoch_s: FloatArray, terms: tuple[tuple[float, int], ...]) -> FloatArray:
    """Columns sin/cos per order and period, exactly as ``prophet.Prophet.fourier_series``."""
    t_days = np.floor(np.asarray(epoch_s, dtype=np.float64)) / 86400.0
    cols: list[FloatArray] = []
    for period, order in terms:
        x = 2.0 * np.pi * t_days
        for i in range(order):
            c = x * (i + 1) / period
            cols.append(np.sin(c))
            cols.append(np.cos(c))
    if not cols:
        return np.zeros((t_days.size, 0))
    return np.column_stack(cols)
