"""Rolling-origin backtest: one origin per step in the last ``test_fraction`` of a series.

At origin ``o`` (an index; its time is the first point not yet seen) the forecaster sees
``values[:o]`` only and predicts targets ``o .. o + n_targets - 1``. Which origins are tested
depends on the series length, but a forecast at an origin never does (see ``forecaster.models``).
The naive baselines are scored on the same pairs: persistence, hour mean, seasonal naive.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from forecaster.api import n_targets
from forecaster.features import FEATURES, History, feature_matrix
from forecaster.metrics import Scores, score
from forecaster.models import BASELINE_FEATURES, Forecaster, Predictions
from forecaster.registry import get_forecaster
from forecaster.settings import DEFAULT_SETTINGS, ForecasterSettings

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class SeriesBacktest:
    history: History
    origins: IntArray
    n_targets: int
    predictions: Predictions

    def headline(self) -> tuple[IntArray, FloatArray, FloatArray, FloatArray]:
        """(origins, actual, p50, p90) at the horizon lead, where the actual is observed."""
        target = self.origins - 1 + self.n_targets
        inside = target < self.history.size
        y = np.full(self.origins.size, np.nan)
        y[inside] = self.history.values[target[inside]]
        ok = np.isfinite(y)
        return (self.origins[ok], y[ok], self.predictions.p50[ok, -1],
                self.predictions.p90[ok, -1])

    def scores(self) -> dict[str, Scores]:
        """Headline scores of the product and of each naive baseline on the same pairs."""
        origins, y, p50, p90 = self.headline()
        out = {"product": score(y, p50, p90)}
        x = feature_matrix(self.history, origins, self.n_targets)
        for name, col in BASELINE_FEATURES.items():
            out[name] = score(y, x[:, FEATURES.index(col)])
        return out


def test_origins(size: int, test_fraction: float) -> IntArray:
    """The last ``test_fraction`` of the steps (at least one), each an origin."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test fraction must be in (0, 1), got {test_fraction}")
    count = max(1, round(size * test_fraction))
    return np.arange(max(1, size - count), size, dtype=np.int64)


def backtest_series(history: History, horizon_s: int, test_fraction: float, method: str,
                    settings: ForecasterSettings = DEFAULT_SETTINGS,
                    forecaster: Forecaster | None = None) -> SeriesBacktest:
    origins = test_origins(history.size, test_fraction)
    steps = n_targets(horizon_s, history.step_s)
    model = forecaster or get_forecaster(method, settings)
    return SeriesBacktest(history, origins, steps, model.predict(history, origins, steps))


@dataclass(frozen=True, slots=True, eq=False)
class BacktestTask:
    history: History
    horizon_s: int
    test_fraction: float
    method: str
    settings: ForecasterSettings = DEFAULT_SETTINGS


def run_task(task: BacktestTask) -> SeriesBacktest:
    """One series (top-level so a process pool can run it)."""
    return backtest_series(task.history, task.horizon_s, task.test_fraction, task.method,
                           task.settings)


def run_all(tasks: list[BacktestTask], workers: int,
            on_done: Callable[[SeriesBacktest], None] | None = None) -> list[SeriesBacktest]:
    """Backtest every series, in a process pool when ``workers > 1``; results in task order."""
    results: dict[int, SeriesBacktest] = {}
    if workers <= 1 or len(tasks) <= 1:
        for i, task in enumerate(tasks):
            results[i] = run_task(task)
            if on_done:
                on_done(results[i])
    else:
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx) as pool:
            futures = {pool.submit(run_task, t): i for i, t in enumerate(tasks)}
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                if on_done:
                    on_done(results[futures[fut]])
    return [results[i] for i in range(len(tasks))]
