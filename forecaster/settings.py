"""Knobs of the forecaster (frozen; the control plane maps its own settings onto these).

The defaults are the ones the benchmark in ``benchmarks/forecast`` measures.
"""

from __future__ import annotations

from dataclasses import dataclass

DAY_S = 86_400
WEEK_S = 7 * DAY_S


@dataclass(frozen=True, slots=True)
class ForecasterSettings:
    """How models are refitted, trained, guarded and calibrated.

    Every fit happens at an *anchor*: a time on a fixed cadence (``refit_period_s`` for the level
    model, ``seasonal_period_s`` for Prophet), shifted per series by a stable hash of its id so a
    fleet's refits spread over the period. A fit at anchor A uses only data before A, so the
    forecast at any origin depends only on data before that origin.
    """

    refit_period_s: int = 6 * 3600
    seasonal_period_s: int = DAY_S
    warm_chain_s: int = WEEK_S  # Prophet warm-start chains restart cold at these boundaries
    replay_chain: bool = True  # no stored previous fit: replay the chain (else fit cold)
    train_window_s: int = 28 * DAY_S
    seasonal_window_s: int = 28 * DAY_S
    seasonal_step_s: int = 3600  # Prophet fits on hourly means (half the points of 30-minute
    #  means, the same 20-minute accuracy on the benchmark traces; benchmarks/forecast)
    validation_s: int = 2 * DAY_S
    calibration_s: int = 3 * DAY_S
    min_train_rows: int = 96
    min_seasonal_points: int = 96  # hourly means: four days before Prophet joins in
    min_baseline_pairs: int = 12
    guard_margin: float = 0.25  # fall back when recent WAPE > best baseline x (1 + margin)
    p90_level: float = 0.91  # quantile of recent residuals used for p90 (dev traces: ~0.90)
    max_train_rows: int = 4000  # training rows of a window, thinned evenly to at most this
    max_fit_rows: int = 2500  # the median-regression fits use the newest this many of them
    cache_entries: int = 4096
    boosted_min_step_s: int = 600  # the boosted model (forecaster.boosted) serves steps this
    #  coarse or coarser (the headline is <= 2 steps ahead) ...
    boosted_max_zero_share: float = 0.85  # ... whose training window has fewer zeros than this

    def __post_init__(self) -> None:
        for name in ("refit_period_s", "seasonal_period_s", "warm_chain_s", "train_window_s",
                     "seasonal_window_s", "seasonal_step_s", "validation_s", "calibration_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ForecasterSettings.{name} must be > 0")
        if self.max_fit_rows < 1:
            raise ValueError("ForecasterSettings.max_fit_rows must be >= 1")
        if not 0.5 <= self.p90_level < 1.0:
            raise ValueError("ForecasterSettings.p90_level must be in [0.5, 1)")
        if not 0.0 <= self.boosted_max_zero_share <= 1.0:
            raise ValueError("ForecasterSettings.boosted_max_zero_share must be in [0, 1]")
        if self.guard_margin < 0:
            raise ValueError("ForecasterSettings.guard_margin must be >= 0")


DEFAULT_SETTINGS = ForecasterSettings()
