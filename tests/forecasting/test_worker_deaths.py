"""The forecast job when a process dies under it (the kernel's OOM killer sends SIGKILL): a pool
worker, or the job's own process. Real processes and real signals; a model "kills its worker"
through its history, whose unpickling in the worker process sends that process SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from controlplane.forecast_job import STORE_BATCH, JobConfig, run_job
from controlplane.forecast_pool import FIT_DEFERRED, WORKER_DIED, ModelTask, compute_all
from controlplane.store import Store
from forecaster.settings import DEFAULT_SETTINGS
from forecaster.types import Forecast, TrafficSeries
from tests.forecasting.builders import diurnal, long_csv

NOW = datetime(2025, 3, 6, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def _wait_for(ready: Any, what: str) -> None:
    """Poll ``ready()`` (a condition of other processes, not a guess at their timing)."""
    deadline = time.monotonic() + 60
    while not ready():
        assert time.monotonic() < deadline, f"waited 60 s for {what}"
        time.sleep(0.01)


def _in_worker(pids: str | None, others: int, go: str | None, series: TrafficSeries,
               kill: bool, outlive: bool) -> TrafficSeries:
    """Runs in the pool worker that takes the task: notes its pid in ``pids``, waits until
    ``others`` other workers noted theirs (so that tasks run side by side), until every other
    noted one is gone (``outlive``) and until ``go`` exists, then SIGKILLs its own process
    (``kill``) or goes on with ``series``."""
    if pids is not None:
        Path(pids, str(os.getpid())).touch()
        _wait_for(lambda: len(list(Path(pids).iterdir())) > others, "the other workers")
        if outlive:
            gone = [int(p.name) for p in Path(pids).iterdir() if p.name != str(os.getpid())]
            _wait_for(lambda: not any(_alive(pid) for pid in gone), "the other workers' end")
    if go is not None:
        _wait_for(Path(go).exists, go)
    if kill:
        os.kill(os.getpid(), signal.SIGKILL)
    return series


class InWorker(TrafficSeries):
    """A history that, unpickled in a pool worker, runs ``_in_worker`` there first."""

    hook: tuple[str | None, int, str | None, bool, bool]

    def hooked(self, pids: str | None = None, others: int = 0, go: str | None = None,
               kill: bool = False, outlive: bool = False) -> InWorker:
        object.__setattr__(self, "hook", (pids, others, go, kill, outlive))
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        pids, others, go, kill, outlive = self.hook
        plain = TrafficSeries(self.series_id, self.step_s, self.start_at, self.values)
        return (_in_worker, (pids, others, go, plain, kill, outlive))


def _series(name: str, seed: int = 0) -> TrafficSeries:
    values = diurnal(1.0, 60, seed=seed, level=20 + seed)
    start = NOW - timedelta(seconds=values.size * 60)
    return TrafficSeries(name, 60, start, tuple(float(v) for v in values))


def _hooked(name: str, **hook: Any) -> InWorker:
    plain = _series(name)
    return InWorker(name, plain.step_s, plain.start_at, plain.values).hooked(**hook)


def _task(series: TrafficSeries) -> ModelTask:
    return ModelTask(series, 1200, "persistence", DEFAULT_SETTINGS, None)


def test_a_worker_dying_while_another_models_result_is_handled_fails_only_its_model(
        tmp_path: Path) -> None:
    pids, go = tmp_path / "pids", tmp_path / "go"
    pids.mkdir()
    tasks = [_task(_hooked("fast", pids=str(pids), others=1)),
             _task(_hooked("killer", pids=str(pids), others=1, go=str(go), kill=True)),
             _task(_series("c", 1)), _task(_series("d", 2))]

    def pool_breaks_meanwhile(stage: str, done: int, total: int) -> None:
        if done == 1:  # "fast" is done: now "killer" dies, and every worker of the pool ends
            workers = [int(p.name) for p in pids.iterdir()]
            go.touch()
            _wait_for(lambda: not any(_alive(pid) for pid in workers), "the broken pool")

    # a budget: the next model is submitted only once a worker is free, i.e. to a broken pool
    results, failed = compute_all(tasks, workers=2, fit_budget_s=60.0,
                                  on_progress=pool_breaks_meanwhile)
    assert [r.forecast.series_id for r in results] == ["fast", "c", "d"]
    assert failed == {"killer": WORKER_DIED}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class _Source:
    def __init__(self, series: list[TrafficSeries], fetch_s: float = 0.0) -> None:
        self.series, self.fetch_s = {s.series_id: s for s in series}, fetch_s

    def model_names(self) -> list[str]:
        return list(self.series)

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        time.sleep(self.fetch_s)  # a slow source, e.g. Prometheus over a week of history
        return self.series[model]


class _Sink:
    def __init__(self) -> None:
        self.saved: list[str] = []

    def save_forecasts(self, forecasts: Sequence[Forecast], computed_at: datetime) -> None:
        self.saved += [f.series_id for f in forecasts]


def test_a_model_that_kills_its_worker_fails_alone_and_every_other_model_is_stored(
        tmp_path: Path) -> None:
    names = [f"model-{k}" for k in range(7)]
    pids = str(tmp_path)
    # model-1 kills its worker while model-0 runs in the other one, until the pool broke
    series = [_hooked("model-0", pids=pids, others=1, outlive=True),
              _hooked("model-1", pids=pids, others=1, kill=True),
              *(_series(n, k) for k, n in enumerate(names) if k >= 2)]
    sink = _Sink()
    report = run_job(_Source(series), sink, NOW,
                     JobConfig(method="persistence", history_s=86_400, workers=2))
    assert report.failed == {"model-1": WORKER_DIED}
    others = [n for n in names if n != "model-1"]
    assert sorted(sink.saved) == others  # model-0 too (retried alone), each once
    assert sorted(f.series_id for f in report.forecasts) == others


def test_a_run_killed_part_way_has_stored_the_forecasts_it_made_before(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'job.db'}"
    Store.open(url, migrate=True)
    made = [f"m{k:02d}" for k in range(STORE_BATCH + 4)]
    trace = long_csv(tmp_path / "t.csv", {**{n: diurnal(0.5, 60, seed=k)
                                             for k, n in enumerate(made)},
                                          "zz-oom": diurnal(0.5, 60)}, 60)
    # the job's own process is killed while it forecasts the last model (--workers 1 runs
    # the fits in it), as the OOM killer would kill the container's biggest process
    script = ("import os, signal\n"
              "import controlplane.forecast_pool as pool\n"
              "real = pool.compute_one\n"
              "def compute_one(task):\n"
              "    if task.series.series_id == 'zz-oom':\n"
              "        os.kill(os.getpid(), signal.SIGKILL)\n"
              "    return real(task)\n"
              "pool.compute_one = compute_one\n"
              "from controlplane.cli import main\n"
              "main()\n")
    done = subprocess.run(
        [sys.executable, "-c", script, "forecast", "run", "--csv", str(trace), "--store", url,
         "--method", "persistence", "--history", "12h", "--workers", "1", "--json"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == -signal.SIGKILL, done.stderr
    stored = Store.open(url).latest_forecasts()
    assert set(made[:STORE_BATCH]) <= set(stored) <= set(made)
    assert all(np.isfinite(stored[n].p90_max()) for n in stored)


def test_the_fit_budget_counts_from_the_runs_start_so_a_slow_fetch_spends_it() -> None:
    names = [f"model-{k}" for k in range(6)]
    source = _Source([_series(n, k) for k, n in enumerate(names)], fetch_s=0.25)
    report = run_job(source, None, NOW, JobConfig(method="persistence", history_s=86_400,
                                                  fit_budget_s=1.0, workers=1))
    assert report.fetch_s > 1.0  # the budget was spent before the first fit
    kinds = {f.series_id: f.fallback_reason for f in report.forecasts}
    assert kinds[names[0]] != FIT_DEFERRED  # the one first fit per worker
    assert {kinds[n] for n in names[1:]} == {FIT_DEFERRED} and report.deferred == 5
    assert not report.failed
