"""The forecast job's compute step: one task per model, in a process pool, within a fit budget.

A model with fitted state on disk (``--state-dir``) reuses it until its staggered refit anchor,
which is cheap; a model without state (a new model, or every model on a cold start) fits from
scratch, which costs ~0.1 CPU-s at 1-minute steps and ~2 CPU-s for a boosted 10-minute model.
So that a cold start of a large fleet cannot hold a tick for many minutes, ``fit_budget_s``
bounds when a first fit may start: models with state run first, and a model that would fit from
scratch is started only within ``fit_budget_s`` wall seconds of the run's start (the job passes
the start of its fetch: a slow source spends the budget too). One that is not gets a
persistence forecast (p90 calibrated from its own recent errors) with
``fallback_reason="fit_deferred"``, and the next run, which starts with the models now holding
state, fits it then. Fits already started finish, so a run can overshoot the budget by one fit
per worker. Whatever the budget (0 too, or one that the models with state used up), every run
starts at least one first fit per worker, so that a fleet of N models without state is fitted
after at most ceil(N / workers) runs instead of waiting for ever.

A worker process that dies (the kernel's OOM killer) breaks the pool. A new pool then runs the
models not yet done, and the ones that were running when it died are retried one at a time
after them: a model whose worker dies again while it runs alone is the one that kills it and
fails (``WORKER_DIED``); the others get their forecasts. At most ``POOL_RESTARTS`` new pools a
run, so that it always ends.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from queue import SimpleQueue

from forecaster.api import forecast, n_targets
from forecaster.calibrate import fitted_leads
from forecaster.features import History
from forecaster.persist import (
    export_state,
    holds_state,
    import_state,
    load_state,
    save_state,
    state_path,
)
from forecaster.registry import get_forecaster
from forecaster.settings import ForecasterSettings
from forecaster.types import Forecast, TrafficSeries

log = logging.getLogger("headroom.forecast_job")

#: the fallback reason of a model whose first fit waits for a later run (``fit_budget_s``)
FIT_DEFERRED = "fit_deferred"
#: the prefix of ``forecaster.api.forecast``'s fallback reason when the model raised
FIT_FAILED = "fit_failed:"

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class ModelTask:
    series: TrafficSeries
    horizon_s: int
    method: str
    settings: ForecasterSettings
    state_dir: Path | None

    def state_file(self) -> Path | None:
        if self.state_dir is None:
            return None
        return state_path(self.state_dir, self.series.series_id, self.method)

    def has_state(self) -> bool:
        """Whether a fit stored for this model can be loaded (``holds_state``): a state file
        of an older version or of another model is a first fit, under the fit budget."""
        path = self.state_file()
        return path is not None and holds_state(path, self.series.series_id)


@dataclass(frozen=True, slots=True)
class ModelResult:
    forecast: Forecast
    compute_s: float
    refit: bool  # the level model was fitted in this run (not taken from stored state)
    seasonal_fits: int  # Prophet fits in this run
    deferred: bool = False  # no fit started: the fit budget was spent (``FIT_DEFERRED``)
    #: why the fitted state could not be written (the OS error: disk full, read-only, quota);
    #: '' when it was, or when there is no state dir
    state_error: str = ""


def compute_one(task: ModelTask) -> ModelResult:
    """Forecast one model (runs in a worker process); loads/saves its fitted state."""
    started = time.perf_counter()
    h = History.of(task.series)
    model = get_forecaster(task.method, task.settings)
    path = task.state_file()
    loaded = 0
    if path is not None:
        try:
            loaded = import_state(model, h, load_state(path))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError,
                OverflowError) as exc:
            log.warning("forecaster state %s of %r is malformed (%s: %s); refitting", path,
                        task.series.series_id, type(exc).__name__, exc)
    fits = getattr(model, "fits_done", 0)
    chain = getattr(model, "seasonal", None)
    seasonal = getattr(chain, "fits_done", 0)
    made = forecast(task.series, task.horizon_s, task.method, task.settings, history=h)
    if loaded and made.fallback_reason.startswith(FIT_FAILED) and hasattr(model, "forget"):
        # a stored fit that loads but cannot predict (e.g. coefficients of another shape)
        # would otherwise be saved again and serve persistence on every run until its anchor
        log.warning("forecaster state %s of %r does not fit the model (%s); refitting", path,
                    task.series.series_id, made.fallback_reason)
        model.forget(task.series.series_id)
        made = forecast(task.series, task.horizon_s, task.method, task.settings, history=h)
    state_error = ""
    if path is not None:
        leads = fitted_leads(n_targets(task.horizon_s, task.series.step_s))
        try:
            save_state(path, export_state(model, h, h.size, leads))
        except OSError as exc:  # the job reports these once (JobReport.state_unsaved)
            state_error = exc.strerror or str(exc)
            log.debug("cannot write forecaster state %s of %r: %s", path,
                      task.series.series_id, exc)
        except ValueError as exc:  # a non-finite number in this model's fit
            log.warning("cannot write forecaster state %s of %r: %s", path,
                        task.series.series_id, exc)
    return ModelResult(made, time.perf_counter() - started,
                       getattr(model, "fits_done", 0) > fits,
                       getattr(chain, "fits_done", 0) - seasonal, state_error=state_error)


def deferred_one(task: ModelTask) -> ModelResult:
    """Persistence, with its p90 from the model's own recent errors, instead of a first fit."""
    started = time.perf_counter()
    made = forecast(task.series, task.horizon_s, "persistence", task.settings)
    if not made.fallback_reason:
        made = replace(made, fallback_reason=FIT_DEFERRED)
    return ModelResult(made, time.perf_counter() - started, refit=False, seasonal_fits=0,
                       deferred=True)


def compute_all(tasks: list[ModelTask], workers: int, fit_budget_s: float | None,
                on_progress: Progress | None = None, *, budget_from_s: float | None = None,
                on_result: Callable[[ModelResult], None] | None = None
                ) -> tuple[list[ModelResult], dict[str, str]]:
    """Every task's result, in task order: models with stored state first, then the others
    while ``fit_budget_s`` lasts (wall seconds from ``budget_from_s``, a ``time.perf_counter()``
    reading such as the run's start, default now; None: no limit), and at least ``workers`` of
    them in any case; the rest deferred. ``on_result`` sees each result as it is made (in the
    calling process; its errors end the call), so a caller can store them as they come.
    A task that raises has no result but a reason in the second value (series id -> why). When
    a worker process dies (killed, e.g. out of memory) the pool breaks: a new one finishes the
    models not started, and the models running in it are retried one at a time, so that only
    a model whose worker dies while running alone fails (``WORKER_DIED``), within
    ``POOL_RESTARTS`` new pools."""
    base_s = time.perf_counter() if budget_from_s is None else budget_from_s
    deadline = None if fit_budget_s is None else base_s + fit_budget_s
    warm = [t.has_state() for t in tasks]
    order = sorted(range(len(tasks)), key=lambda i: not warm[i])  # stable: warm ones first
    out: dict[int, ModelResult] = {}
    failed: dict[int, str] = {}
    first_fits = 0  # started in this run: the first ``workers`` start whatever the budget

    def start(i: int) -> bool:
        nonlocal first_fits
        if warm[i] or deadline is None:
            return True
        if first_fits < max(1, workers) or time.perf_counter() < deadline:
            first_fits += 1
            return True
        return False

    def done(i: int, result: ModelResult | str) -> None:
        if isinstance(result, str):
            failed[i] = result
        else:
            out[i] = result
            if on_result:
                on_result(result)
        if on_progress:
            on_progress("forecast", len(out) + len(failed), len(tasks))

    if workers <= 1 or len(tasks) <= 1:
        for i in order:
            made: ModelResult | str
            try:
                made = compute_one(tasks[i]) if start(i) else deferred_one(tasks[i])
            except Exception as exc:  # one model's bug must not end the job
                made = _raised(exc)
            done(i, made)
    else:
        _in_pools(_Plan(tasks, list(reversed(order)), workers),
                  start, done)
    return ([out[i] for i in range(len(tasks)) if i in out],
            {tasks[i].series.series_id: failed[i] for i in sorted(failed)})


#: new pools a run starts after worker processes died, at most (each death either moves the
#: models then running to be retried alone, or fails the one model that ran alone); after
#: that the models not done fail with ``WORKER_DIED``, so that a run always ends
POOL_RESTARTS = 4


@dataclass(slots=True)
class _Plan:
    """What a pool still has to run: ``queue`` (pop() takes the next in order; under a budget a
    first fit's start is decided when a worker is free), ``ready`` (started, not submitted: the
    pool broke first), ``alone`` (running when a worker died: retried one at a time)."""

    tasks: list[ModelTask]
    queue: list[int]
    workers: int
    ready: list[int] = field(default_factory=list)
    alone: list[int] = field(default_factory=list)
    retried: set[int] = field(default_factory=set)  # ran alone: a death there is theirs
    skipped: list[int] = field(default_factory=list)  # deferred by the budget

    def unfinished(self) -> list[int]:
        return [*self.ready, *reversed(self.queue), *self.alone]


def _in_pools(plan: _Plan, start: Callable[[int], bool],
              done: Callable[[int, ModelResult | str], None]) -> None:
    """Run ``plan`` in process pools, a new one after each that broke (``POOL_RESTARTS``)."""
    ctx = mp.get_context(pool_start_method())
    for _ in range(POOL_RESTARTS + 1):
        with ProcessPoolExecutor(max_workers=min(plan.workers, len(plan.tasks)),
                                 mp_context=ctx) as pool:
            suspects = _drain(pool, plan, start, done)
        if suspects is None:
            break
        log.warning("forecast worker process died (killed, e.g. out of memory) while "
                    "forecasting %s; starting a new pool",
                    ", ".join(repr(plan.tasks[i].series.series_id) for i in suspects))
        for i in suspects:
            if i in plan.retried:
                done(i, WORKER_DIED)
            else:
                plan.alone.append(i)
    else:
        for i in plan.unfinished():
            done(i, WORKER_DIED)
    for i in plan.skipped:
        done(i, deferred_one(plan.tasks[i]))


def _drain(pool: ProcessPoolExecutor, plan: _Plan, start: Callable[[int], bool],
           done: Callable[[int, ModelResult | str], None]) -> list[int] | None:
    """Run ``plan``'s tasks in ``pool``, at most one per worker at a time (so that the tasks in
    flight when a worker dies are the suspects), then the ``alone`` ones one at a time. None
    when all are done; else the pool broke and these were in flight."""
    running: dict[Future[ModelResult], int] = {}
    finished: SimpleQueue[Future[ModelResult]] = SimpleQueue()  # O(1) per completion

    def fill() -> bool:
        """Submit what may start now; False when the pool is broken."""
        while len(running) < plan.workers and (plan.ready or plan.queue or
                                               (plan.alone and not running)):
            if plan.ready:
                i = plan.ready.pop()
            elif plan.queue:
                i = plan.queue.pop()
                if not start(i):
                    plan.skipped.append(i)
                    continue
            else:
                i = plan.alone.pop()
                plan.retried.add(i)
            try:
                fut = pool.submit(compute_one, plan.tasks[i])
            except BrokenProcessPool:  # a worker died since the last result: not started
                (plan.alone if i in plan.retried else plan.ready).append(i)
                plan.retried.discard(i)
                return False
            running[fut] = i
            fut.add_done_callback(finished.put)
        return True

    if not fill():
        return _settle(running, done)
    while running:
        fut = finished.get()
        if isinstance(fut.exception(), BrokenProcessPool):
            return _settle(running, done)
        i = running.pop(fut)
        done(i, _outcome(fut))
        if not fill():
            return _settle(running, done)
    return None


def _settle(running: dict[Future[ModelResult], int],
            done: Callable[[int, ModelResult | str], None]) -> list[int]:
    """The tasks in flight when the pool broke (each of their futures ends, the broken pool
    fails those it did not finish): results kept, the others returned as suspects."""
    wait(running)
    suspects = []
    for fut, i in running.items():
        if isinstance(fut.exception(), BrokenProcessPool):
            suspects.append(i)
        else:
            done(i, _outcome(fut))
    return suspects


def _outcome(fut: Future[ModelResult]) -> ModelResult | str:
    exc = fut.exception()
    if exc is None:
        return fut.result()
    if isinstance(exc, Exception):  # one model's bug must not end the job
        return _raised(exc)
    raise exc


#: why a model has no forecast when its worker process died while it ran alone (after a first
#: death, the models then running are retried one at a time), or when ``POOL_RESTARTS`` new
#: pools died too
WORKER_DIED = ("forecast failed: a worker process ended abruptly (killed, e.g. out of memory), "
               "taking this model's forecast with it")


def _raised(exc: Exception) -> str:
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"forecast failed: {type(exc).__name__}" + (f": {text}" if text else "")


def pool_start_method() -> str:
    """``fork`` (workers start with everything imported) in a single-threaded process such as
    ``headroom forecast run``; ``forkserver`` where other threads run (``headroom serve``: gRPC,
    the scheduler), since a fork copies locks another thread may hold."""
    methods = mp.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"
