"""The forecast refresh job: forecast every model (or one shard of them) and store the results.

    models = source.model_names() filtered by the shard  ->  fetch each history (parent process)
    (a source that can, e.g. Prometheus, lists only the models with data in the history window)
      -> forecast in a process pool (one task per model; per-model fallback inside)
      -> store the forecasts as they are made, in batches (sink.save_forecasts)

Sharding (``Shard.parse("2/8")``) is by a stable hash of the model name, so a Kubernetes Indexed
Job with ``--shard $(JOB_COMPLETION_INDEX)/N`` splits a fleet without coordination. With a state
directory, each model's fitted state survives between runs: a run refits only the models whose
refit anchor has passed (anchors are staggered per model), the others reuse their stored fit.
``JobConfig.fit_budget_s`` bounds when a first fit may start, so that a cold start of a large
fleet does not hold a run for many minutes (``controlplane.forecast_pool``).

Fallbacks are per model and recorded in ``Forecast.fallback_reason``: ``short_history``,
``worse_than_baseline``, ``seasonal_fit_failed`` (level model without Prophet), ``fit_failed:<E>``
(persistence), ``no_observations``, ``fit_deferred`` (persistence until a later run fits the
model: the fit budget was spent). A model whose history cannot be fetched, or whose forecast
raised or killed its worker process (e.g. out of memory: ``controlplane.forecast_pool`` retries
the models beside it in a new pool), gets no forecast (never a made-up zero) and is listed in
the report (the CLI exits 1); the others are stored. The control plane then treats its last
forecast as stale. Forecasts are stored in batches as they are made (``STORE_BATCH`` forecasts,
or ``STORE_EVERY_S`` seconds), so that a run killed part-way (out of memory, its deadline) keeps
the forecasts it had made. After a source that could not be reached or did
not answer in time (``SourceUnreachable``), the models after it are not asked, and are listed
so: each would wait the source's whole timeout. A model whose fitted state cannot be written (disk
full, read-only file system, quota) keeps its forecast, but is counted in
``JobReport.state_unsaved`` with the first OS error (the CLI exits 3, serve/demo log
``forecast.state_unsaved``): unnoticed, every run would refit every model, and models deferred
by the fit budget would never get state.

Warnings are per model too (``JobReport.warnings``): what the source cleaned (a source with
``read_history`` reports e.g. ``3 negative value(s) clipped to 0``), ``stale_history`` when
the newest observation is more than ``stale_after_s(step)`` = max(1 h, 3 steps) older than the
forecast time -- the same limit behind the forecaster's ``stale_observations`` fallback -- and
the forecast's own ``notes`` (negative values of a history no source cleaned, the store's
observations, clipped to 0 by the forecaster, naming the last observation when it was one).
What the source cleaned is stored with the forecast too, before its own notes
(``with_source_notes``), so that ``headroom status`` and the dashboard show later that a forecast
was made from cleaned input; ``stale_history`` is not (the forecast's fallback reason says so).

At the end of a run the state dir is pruned (``controlplane.forecast_state``): this shard's temp
files of killed runs (older than an hour), and the state files of its models that are no longer
listed, once older than ``JobConfig.state_retention_s``.
"""

from __future__ import annotations

import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from controlplane.forecast_pool import ModelResult, ModelTask, compute_all
from controlplane.forecast_state import prune_state_dir
from forecaster.api import stale_after_s
from forecaster.errors import ForecasterError, SourceUnreachable
from forecaster.settings import DEFAULT_SETTINGS, ForecasterSettings
from forecaster.types import Forecast, SourcedSeries, TrafficSeries

#: the job's forecaster settings: without stored state, Prophet fits cold instead of replaying
#: the week's warm-start chain (the backtest replays it; results agree to optimizer tolerance)
JOB_SETTINGS = replace(DEFAULT_SETTINGS, replay_chain=False)


class HistorySource(Protocol):
    """Where per-model request rates come from (store, Prometheus, CSV)."""

    def model_names(self) -> list[str]: ...

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries: ...


@runtime_checkable
class ReportingHistorySource(Protocol):
    """A source that also says what it cleaned in a model's history (CSV, Prometheus)."""

    def read_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> SourcedSeries: ...


@runtime_checkable
class WindowedHistorySource(Protocol):
    """A source that lists only the models with data in the window the job reads (Prometheus
    keeps the series of a model gone from the fleet for its whole retention)."""

    def model_names_between(self, since_at: datetime, until_at: datetime) -> list[str]: ...


class ForecastSink(Protocol):
    def save_forecasts(self, forecasts: Sequence[Forecast], computed_at: datetime) -> None: ...


@dataclass(frozen=True, slots=True)
class Shard:
    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Shard:
        """'i/N' with 0 <= i < N."""
        try:
            i, n = (int(part) for part in text.split("/"))
        except ValueError as exc:
            raise ValueError(f"--shard {text!r}: expected INDEX/COUNT, e.g. 0/4") from exc
        if n < 1 or not 0 <= i < n:
            raise ValueError(f"--shard {text!r}: need 0 <= INDEX < COUNT")
        return cls(i, n)

    def owns(self, model: str) -> bool:
        return self.owns_crc(zlib.crc32(model.encode()))

    def owns_crc(self, crc: int) -> bool:
        """Whether the model whose name has this crc32 is this shard's (state file names carry
        it, ``forecaster.persist.state_stem``)."""
        return crc % self.count == self.index


@dataclass(frozen=True, slots=True)
class JobConfig:
    horizon_s: int = 1200
    step_s: int = 60
    history_s: int = 7 * 86_400
    method: str = "auto"
    workers: int = 1
    shard: Shard = Shard()
    state_dir: Path | None = None
    settings: ForecasterSettings = JOB_SETTINGS
    #: first fits (models without stored state) start only this many wall seconds into the
    #: compute step, except one per worker, which starts in any case; None: no limit
    fit_budget_s: float | None = None
    #: state files of this shard's models that are no longer listed are removed from the state
    #: dir once this old (mtime); 0: kept (``controlplane.forecast_state``)
    state_retention_s: float = 7 * 86_400


@dataclass(frozen=True, slots=True)
class JobReport:
    computed_at: datetime
    shard: Shard
    models: int
    forecasts: tuple[Forecast, ...]
    failed: dict[str, str]  # model -> why no forecast was made (history not available, or the
    # forecast raised or its worker process died)
    fetch_s: float
    compute_s: float
    store_s: float
    wall_s: float
    refits: int  # models whose level model was fitted in this run
    reused: int  # models served from stored state
    seasonal_fits: int = 0  # Prophet fits in this run
    deferred: int = 0  # models whose first fit waits for a later run (the fit budget was spent)
    methods: dict[str, int] = field(default_factory=dict)
    fallbacks: dict[str, int] = field(default_factory=dict)
    warnings: dict[str, tuple[str, ...]] = field(default_factory=dict)  # model -> warnings
    #: models whose fitted state could not be written to the state dir (disk full, read-only,
    #: quota): their forecasts are made and stored, but the next run refits them
    state_unsaved: int = 0
    state_error: str = ""  # the OS error of the first of them, e.g. 'No space left on device'
    pruned: int = 0  # files removed from the state dir: gone models' state, dead temp files


def run_job(source: HistorySource, sink: ForecastSink | None, now: datetime, config: JobConfig,
            on_progress: Callable[[str, int, int], None] | None = None) -> JobReport:
    """Fetch, forecast and store every model of the shard (``sink=None``: do not store)."""
    wall = time.perf_counter()
    until_at = floor_time(now, config.step_s)
    since_at = until_at - timedelta(seconds=config.history_s)
    listed = (source.model_names_between(since_at, until_at)
              if isinstance(source, WindowedHistorySource) else source.model_names())
    models = [m for m in listed if config.shard.owns(m)]
    tasks: list[ModelTask] = []
    failed: dict[str, str] = {}
    warnings: dict[str, tuple[str, ...]] = {}
    cleaned: dict[str, tuple[str, ...]] = {}  # model -> what its source cleaned in its history
    fetch = time.perf_counter()
    down: SourceUnreachable | None = None
    for i, model in enumerate(models):
        if down is not None:  # each would wait the source's whole timeout: not asked
            failed[model] = f"history unavailable: {down.not_asked()}"
        else:
            try:
                got = _fetch(source, model, since_at, until_at, config.step_s)
                tasks.append(ModelTask(got.series, config.horizon_s, config.method,
                                       config.settings, config.state_dir))
                stale = stale_history(got.series, now)
                if got.warnings:
                    cleaned[model] = got.warnings
                if got.warnings or stale:
                    warnings[model] = got.warnings + ((stale,) if stale else ())
            except (ForecasterError, OSError, ValueError) as exc:
                failed[model] = f"history unavailable: {exc}"
                down = exc if isinstance(exc, SourceUnreachable) else None
        if on_progress:
            on_progress("fetch", i + 1, len(models))
    fetch_s = time.perf_counter() - fetch
    compute = time.perf_counter()
    batches = _Batches(sink, now, cleaned)
    results, broken = compute_all(tasks, config.workers, config.fit_budget_s, on_progress,
                                  budget_from_s=wall, on_result=batches.add)
    failed.update(broken)
    batches.flush()
    compute_s = time.perf_counter() - compute - batches.store_s
    for r in results:  # what the forecaster cleaned that the source did not
        if r.forecast.notes:
            warnings[r.forecast.series_id] = (warnings.get(r.forecast.series_id, ())
                                              + r.forecast.notes)
    forecasts = tuple(with_source_notes(r.forecast, cleaned) for r in results)
    store_s = batches.store_s
    pruned = 0
    if config.state_dir is not None:  # a source that lists no model may be down: keep state
        pruned = prune_state_dir(config.state_dir, config.shard, models,
                                 config.state_retention_s if listed else 0.0)
    refits = sum(r.refit for r in results)
    unsaved = [r.state_error for r in results if r.state_error]
    return JobReport(
        computed_at=now, shard=config.shard, models=len(models), forecasts=forecasts,
        failed=failed, fetch_s=fetch_s, compute_s=compute_s, store_s=store_s,
        wall_s=time.perf_counter() - wall, refits=refits,
        reused=sum(not (r.refit or r.deferred) for r in results),
        seasonal_fits=sum(r.seasonal_fits for r in results),
        deferred=sum(r.deferred for r in results),
        methods=dict(Counter(f.method for f in forecasts)),
        fallbacks=dict(Counter(f.fallback_reason for f in forecasts if f.fallback_reason)),
        warnings=warnings, state_unsaved=len(unsaved), state_error=unsaved[0] if unsaved else "",
        pruned=pruned)


#: forecasts are stored as they are made, in batches of this many at most, or of what this many
#: seconds made: a run killed part-way (OOM, its deadline) keeps what it had made
STORE_BATCH = 32
STORE_EVERY_S = 5.0


class _Batches:
    """The run's forecasts on their way to ``sink`` (None: not stored), each saved once."""

    def __init__(self, sink: ForecastSink | None, computed_at: datetime,
                 cleaned: Mapping[str, tuple[str, ...]]) -> None:
        self.sink, self.computed_at, self.cleaned = sink, computed_at, cleaned
        self.pending: list[Forecast] = []
        self.saved_at_s = time.perf_counter()
        self.store_s = 0.0  # spent saving

    def add(self, result: ModelResult) -> None:
        self.pending.append(with_source_notes(result.forecast, self.cleaned))
        if (len(self.pending) >= STORE_BATCH
                or time.perf_counter() - self.saved_at_s >= STORE_EVERY_S):
            self.flush()

    def flush(self) -> None:
        started_s = time.perf_counter()
        if self.sink is not None and self.pending:
            self.sink.save_forecasts(tuple(self.pending), computed_at=self.computed_at)
        self.pending = []
        self.saved_at_s = time.perf_counter()
        self.store_s += self.saved_at_s - started_s


def with_source_notes(made: Forecast, cleaned: Mapping[str, tuple[str, ...]]) -> Forecast:
    """``made`` with what the source cleaned in its model's history (``cleaned``: model ->
    lines) before its own notes, as it is stored and reported."""
    before = cleaned.get(made.series_id, ())
    return replace(made, notes=before + made.notes) if before else made


def _fetch(source: HistorySource, model: str, since_at: datetime, until_at: datetime,
           step_s: int) -> SourcedSeries:
    if isinstance(source, ReportingHistorySource):
        return source.read_history(model, since_at, until_at, step_s)
    return SourcedSeries(source.rate_history(model, since_at, until_at, step_s))


def stale_history(series: TrafficSeries, now: datetime) -> str:
    """``stale_history: ...`` when the newest observation of ``series`` is more than
    ``stale_after_s(step)`` before ``now`` (or there is none), else ''."""
    values = np.asarray(series.values, dtype=np.float64)
    observed = np.flatnonzero(np.isfinite(values))
    if not observed.size:
        return (f"stale_history: no sample between {series.start_at.isoformat()} and "
                f"{series.end_at.isoformat()}")
    last_at = series.start_at + timedelta(seconds=int(observed[-1]) * series.step_s)
    age_s = (now - last_at).total_seconds()
    limit_s = stale_after_s(series.step_s)
    if age_s <= limit_s:
        return ""
    return (f"stale_history: last sample {age_s / 3600:.1f} h before the forecast time "
            f"(at {last_at.isoformat()}; limit {limit_s / 3600:g} h)")


def state_dir_problem(state_dir: Path) -> str | None:
    """Why the job cannot keep fitted state in ``state_dir`` (created if missing), or None. A
    directory it cannot write would log a warning per model on every refresh, and first fits
    deferred by a fit budget would wait for ever, since no model would ever hold state."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=state_dir):
            pass
    except OSError as exc:
        return f"cannot write there ({exc.strerror or exc})"
    return None


def floor_time(at: datetime, step_s: int) -> datetime:
    """``at`` rounded down to a multiple of ``step_s`` on the UTC epoch grid, in UTC whatever
    the time zone of ``at`` (a naive ``at`` is taken as UTC and stays naive)."""
    epoch = datetime(1970, 1, 1, tzinfo=None if at.tzinfo is None else UTC)
    seconds = int((at - epoch).total_seconds())
    return epoch + timedelta(seconds=seconds - seconds % step_s)
