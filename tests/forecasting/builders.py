"""Synthetic traffic for forecaster tests (seeded, so every run sees the same numbers)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from forecaster.features import History
from forecaster.stacking import StackingForecaster
from forecaster.types import TrafficSeries

START = datetime(2025, 3, 3, tzinfo=UTC)  # a Monday


def diurnal(days: float, step_s: int, seed: int = 0, level: float = 100.0,
            amplitude: float = 0.5, noise: float = 0.08) -> npt.NDArray[np.float64]:
    """Daily sine around ``level`` with a slowly wandering level and multiplicative noise."""
    rng = np.random.default_rng(seed)
    n = int(days * 86_400 // step_s)
    t = np.arange(n) * step_s
    wander = np.cumsum(rng.normal(0, 0.002, n))
    shape = 1 + amplitude * np.sin(2 * np.pi * t / 86_400)
    return np.asarray(level * shape * np.exp(wander) * (1 + rng.normal(0, noise, n)))


def series(values: npt.NDArray[np.float64], step_s: int, name: str = "m1",
           start: datetime = START) -> TrafficSeries:
    return TrafficSeries(series_id=name, step_s=step_s, start_at=start,
                         values=tuple(float(v) for v in values))


def history(values: npt.NDArray[np.float64], step_s: int, name: str = "m1") -> History:
    return History.of(series(values, step_s, name))


def write_csv(path: Path, columns: dict[str, list[object]]) -> Path:
    names = list(columns)
    rows = zip(*(columns[c] for c in names), strict=True)
    path.write_text(",".join(names) + "\n" + "".join(",".join(str(v) for v in r) + "\n"
                                                     for r in rows))
    return path


def long_csv(path: Path, models: dict[str, npt.NDArray[np.float64]], step_s: int,
             start: datetime = START) -> Path:
    ts: list[object] = []
    model: list[object] = []
    rate: list[object] = []
    for name, values in models.items():
        for i, v in enumerate(values):
            ts.append((start + timedelta(seconds=i * step_s)).strftime("%Y-%m-%d %H:%M:%S"))
            model.append(name)
            rate.append(round(float(v), 4))
    return write_csv(path, {"ts": ts, "model": model, "rate_rps": rate})


class NoSeason:
    """A seasonal backend that must not be asked: the boosted model replaces Prophet there."""

    def curve_at(self, h: object, anchor_s: float) -> object:
        raise AssertionError("the boosted path fitted a seasonal curve")


def boosted_auto() -> StackingForecaster:
    """The guarded hybrid forecaster, which takes the boosted model on coarse dense series."""
    return StackingForecaster("hybrid", NoSeason(), guard=True)  # type: ignore[arg-type]
