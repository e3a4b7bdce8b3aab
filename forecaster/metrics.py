"""Forecast accuracy metrics, in percent unless stated (the conventions of the bench judge)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
QUANTILE = 0.9


@dataclass(frozen=True, slots=True)
class Scores:
    pairs: int
    wape: float | None  # sum|y - f| / sum|y|
    smape: float | None  # mean 2|y - f| / (|y| + |f|), 0/0 = 0
    mape: float | None  # over non-zero actuals only
    bias: float | None  # sum(f - y) / sum|y|
    coverage: float | None  # share of actuals <= p90 (a fraction, not percent)
    pinball: float | None  # mean pinball loss at q = 0.9 (series units)
    pinball_scaled: float | None  # pinball / mean|y|

    def as_dict(self) -> dict[str, float | int | None]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def score(y: FloatArray, f: FloatArray, p90: FloatArray | None = None) -> Scores:
    """Point metrics of ``f`` (and quantile metrics of ``p90``) against actuals ``y``."""
    ok = np.isfinite(y) & np.isfinite(f)
    y, f = y[ok], f[ok]
    err = np.abs(y - f)
    denom = float(np.sum(np.abs(y)))
    s_den = np.abs(y) + np.abs(f)
    smape = np.where(s_den > 0, 2 * err / np.where(s_den > 0, s_den, 1.0), 0.0)
    nz = y != 0
    cov = pin = pin_s = None
    if p90 is not None and y.size:
        q = p90[ok]
        diff = y - q
        loss = np.maximum(QUANTILE * diff, (QUANTILE - 1) * diff)
        cov = float(np.mean(y <= q))
        pin = float(np.mean(loss))
        scale = float(np.mean(np.abs(y)))
        pin_s = pin / scale if scale > 0 else None
    return Scores(
        pairs=int(y.size),
        wape=100 * float(np.sum(err)) / denom if denom > 0 else None,
        smape=100 * float(np.mean(smape)) if y.size else None,
        mape=100 * float(np.mean(err[nz] / np.abs(y[nz]))) if nz.any() else None,
        bias=100 * float(np.sum(f - y)) / denom if denom > 0 else None,
        coverage=cov, pinball=pin, pinball_scaled=pin_s)
