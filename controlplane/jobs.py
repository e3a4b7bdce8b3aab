"""APScheduler wiring: stable job ids, one instance per job, coalesced misfires, errors logged.

A job that raises is logged with its traceback and the scheduler keeps running (STYLE.md 3.7 #8).
A job still running when it comes round again (a store that stalls) is skipped, and said once
per overrun, not at every skipped run (APScheduler's own line every time: twice a second for
``placement.follow``).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from datetime import datetime

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.schedulers.background import BackgroundScheduler

log = logging.getLogger("headroom.jobs")

#: the start of APScheduler's line for each run of a job skipped because it still runs
_SKIPPED_RUNNING = "Execution of job \"%s\" skipped: maximum number of running instances"


class _NoSkippedRunLines(logging.Filter):
    """Drops APScheduler's line for each skipped run; ``_Overruns`` says it once instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(_SKIPPED_RUNNING))


_APSCHEDULER_LOG = logging.getLogger("apscheduler.scheduler")
_APSCHEDULER_LOG.addFilter(_NoSkippedRunLines())


def _on_error(event: JobExecutionEvent) -> None:
    log.error("job.failed", extra={"job_id": event.job_id, "error": repr(event.exception)},
              exc_info=(type(event.exception), event.exception, event.exception.__traceback__))


class _Overruns:
    """One ``job.overran`` warning when a job is still running as its next run comes round
    (its runs are skipped until it returns), none for the runs skipped after it; the job's
    next return ends the overrun, so the next one is said again."""

    def __init__(self) -> None:
        self._running_over: set[str] = set()
        self._lock = threading.Lock()

    def on_event(self, event: JobEvent) -> None:
        with self._lock:
            if event.code != EVENT_JOB_MAX_INSTANCES:  # it returned (or raised)
                self._running_over.discard(event.job_id)
                return
            if event.job_id in self._running_over:
                return
            self._running_over.add(event.job_id)
        log.warning("job.overran", extra={
            "job_id": event.job_id,
            "next": "its runs are skipped until this one returns (a stalled store?)"})


def build_scheduler(jobs: dict[str, tuple[Callable[[], object], float]],
                    start_at: datetime | None = None) -> BackgroundScheduler:
    """A scheduler with one interval job per id: ``{"reconcile": (fn, every_s), ...}``."""
    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_listener(_on_error, EVENT_JOB_ERROR)
    scheduler.add_listener(_Overruns().on_event,
                           EVENT_JOB_MAX_INSTANCES | EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
    for job_id, (func, every_s) in jobs.items():
        # APScheduler 3 reads next_run_time=None as "paused": pass it only when given.
        timing = {"next_run_time": start_at} if start_at is not None else {}
        scheduler.add_job(func, "interval", seconds=every_s, id=job_id, name=job_id,
                          max_instances=1, coalesce=True, misfire_grace_time=max(1, int(every_s)),
                          replace_existing=True, **timing)
    return scheduler


def stop_on_sigterm() -> threading.Event:
    """An event SIGTERM sets from now on. A long-running command installs it before it starts
    anything, so a stop sent while it starts (as soon as it prints an address, say) lets it
    finish starting and then stop cleanly, instead of killing it halfway (a fleet lease held
    and never released, a server left without its stop)."""
    stop_event = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop_event.set())
    return stop_event


def run_until_stopped(scheduler: BackgroundScheduler, on_stop: Callable[[], None],
                      stop_event: threading.Event | None = None,
                      on_stopping: Callable[[], None] | None = None) -> None:
    """Start the jobs and block until SIGTERM (``stop_event``, from ``stop_on_sigterm``;
    installed here when not given) or Ctrl-C; then start no job again, call ``on_stopping``
    (while the jobs in flight may still run: what must not wait for them), wait for those
    jobs and call ``on_stop``."""
    if stop_event is None:
        stop_event = stop_on_sigterm()
    scheduler.start()
    try:
        while not stop_event.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        scheduler.pause()
        if on_stopping is not None:
            on_stopping()
        scheduler.shutdown(wait=True)
        on_stop()
