"""Serve's forecast refresh: every model's forecast from its history, stored under the leader's
fencing token.

Only the leader refreshes forecasts, and the reconcile loop sizes every model from the newest
stored one. A leader that stalls in a refresh (fits run for seconds to minutes; a GC pause, a
frozen VM) could store its forecasts after another replica took over and stored newer ones: its
older forecasts would then be the newest rows, the ones every tick sizes from until the next
refresh. So the refresh takes its term's token (``store/tick_fence.py``) when it starts and
stores under it; a refresh whose term ended meanwhile stores nothing more (``forecast.fenced``;
the job stores in batches, those saved while its term lasted stay).
Scheduled ``headroom forecast run`` jobs lead nothing and store unfenced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from controlplane.domain.errors import Fenced, error_line
from controlplane.forecast_job import HistorySource, JobConfig, run_job, state_dir_problem
from controlplane.settings import ConfigError, Settings
from controlplane.store import Store
from forecaster.types import Forecast

log = logging.getLogger("headroom.forecast")


def check_state_dir(state_dir: Path | None) -> None:
    """The forecast refreshes keep fitted state there: a directory they cannot write is refused
    at startup (before serve and demo open their store), not met with a warning per model on
    every refresh."""
    problem = state_dir_problem(state_dir) if state_dir is not None else None
    if problem is not None:
        raise ConfigError(f"forecast.state_dir {state_dir}: {problem}; set a writable "
                          "directory, or null to refit every model on every refresh")


def forecast_jobs(settings: Settings, refresh: Callable[[], object]
                  ) -> dict[str, tuple[Callable[[], object], float]]:
    """Serve's forecast refresh job, every ``forecast.interval_s``; none when scheduled
    ``headroom forecast run`` jobs refresh the forecasts (``forecast.refresh_in_serve`` false,
    logged once: a model whose forecasts those jobs stop refreshing is sized as stale)."""
    if settings.forecast.refresh_in_serve:
        return {"forecast": (refresh, settings.forecast.interval_s)}
    log.info("forecast.refresh_external", extra={"interval_s": settings.forecast.interval_s})
    return {}


@dataclass(frozen=True, slots=True)
class FencedSink:
    """The forecast job's sink: ``store``, saving under ``fence`` (None: unfenced)."""

    store: Store
    fence: int | None

    def save_forecasts(self, forecasts: Sequence[Forecast], computed_at: datetime) -> None:
        self.store.save_forecasts(forecasts, computed_at, fence=self.fence)


def refresh_forecasts(history: HistorySource, store: Store, now: datetime,
                      settings: Settings, fence: int | None = None) -> list[Forecast]:
    """Forecast every model ``history`` lists from the history it gives (the forecast job: the
    store's own observations in the simulator, Prometheus on Kubernetes) and store the
    forecasts in ``store`` under ``fence``, the leader's token when the refresh started (none
    stored, and none returned, when another term claimed the store since)."""
    fs = settings.forecast
    config = JobConfig(horizon_s=fs.horizon_s, step_s=fs.step_s, history_s=fs.history_s,
                       method=fs.method, workers=fs.workers, state_dir=fs.state_dir,
                       fit_budget_s=fs.refresh_budget_s(), state_retention_s=fs.state_retention_s)
    try:
        report = run_job(history, FencedSink(store, fence), now, config)
    except Fenced as error:
        log.error("forecast.fenced", extra={"error": error_line(error),
                                            "next": "this process no longer leads"})
        return []
    for model, why in sorted(report.failed.items()):  # no forecast: its last one goes stale
        log.warning("forecast.failed", extra={"model": model, "reason": why})
    if report.state_unsaved:  # the forecasts are stored; every refresh refits these models
        log.warning("forecast.state_unsaved", extra={
            "state_dir": str(fs.state_dir), "models": report.state_unsaved,
            "of_models": report.models, "error": report.state_error})
    if report.pruned:
        log.info("forecast.state_pruned", extra={"state_dir": str(fs.state_dir),
                                                 "files": report.pruned})
    return list(report.forecasts)
