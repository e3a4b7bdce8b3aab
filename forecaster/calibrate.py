"""Shared pieces of every anchored forecaster: which leads get their own fit, training rows,
p90 calibration from recent residuals, and interpolation between fitted leads (pure numpy)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from forecaster.features import History, level_scale
from forecaster.settings import ForecasterSettings

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
PointFn = Callable[[History, IntArray, int], FloatArray]

#: Residual quantile used when there are too few recent residuals to measure one.
DEFAULT_Q90 = 0.5
MIN_CALIBRATION_ROWS = 20


def fitted_leads(n_targets: int) -> tuple[int, ...]:
    """Leads with their own model: 1, 3, 9, ... and the last; the rest are interpolated
    (1-minute data with a 20-minute horizon fits leads 1, 3, 9 and 20)."""
    if n_targets < 1:
        raise ValueError(f"n_targets must be >= 1, got {n_targets}")
    leads = {n_targets}
    k = 1
    while k < n_targets:
        leads.add(k)
        k *= 3
    return tuple(sorted(leads))


def interpolate_leads(by_lead: dict[int, FloatArray], n_targets: int) -> FloatArray:
    """Columns for leads 1..n_targets, linear between the fitted leads."""
    known = sorted(by_lead)
    cols = np.column_stack([by_lead[k] for k in known])
    out = np.empty((cols.shape[0], n_targets))
    for i in range(cols.shape[0]):
        out[i] = np.interp(np.arange(1, n_targets + 1), known, cols[i])
    return out


def training_origins(h: History, anchor_s: float, lead: int, window_s: float,
                     max_rows: int | None = None, until_s: float | None = None) -> IntArray:
    """Origins whose lead-``lead`` target lies in [anchor - window, until) with until <= anchor,
    with an observed target; thinned evenly (counting back from the newest) to ``max_rows``."""
    hi = h.index_at(anchor_s if until_s is None else min(until_s, anchor_s))
    lo = max(h.index_at(anchor_s - window_s), lead)
    targets = np.arange(lo, min(hi, h.size), dtype=np.int64)
    targets = targets[np.isfinite(h.values[targets])] if targets.size else targets
    if max_rows is not None and targets.size > max_rows:
        stride = -(-targets.size // max_rows)
        targets = targets[(targets[-1] - targets) % stride == 0]
    origins = targets + 1 - lead
    return origins[origins >= 1]


def calibrate_leads(h: History, anchor_s: float, leads: tuple[int, ...], point: PointFn,
                    settings: ForecasterSettings) -> dict[int, float]:
    """Per lead: the ``p90_level`` quantile of (y - p50) / (p50 + level) over recent pairs."""
    out: dict[int, float] = {}
    for k in leads:
        origins = training_origins(h, anchor_s, k, settings.calibration_s, settings.max_train_rows)
        origins = origins[origins >= 1]
        if origins.size < MIN_CALIBRATION_ROWS:
            out[k] = DEFAULT_Q90
            continue
        y = h.values[origins - 1 + k]
        p = np.maximum(point(h, origins, k), 0.0)
        denom = p + level_scale(h, origins)
        ok = np.isfinite(p) & (denom > 0)
        if ok.sum() < MIN_CALIBRATION_ROWS:
            out[k] = DEFAULT_Q90
            continue
        out[k] = float(np.quantile((y[ok] - p[ok]) / denom[ok], settings.p90_level))
    return out
