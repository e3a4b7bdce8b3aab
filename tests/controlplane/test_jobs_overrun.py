"""A job still running when it comes round again (a stalled store holds it) is said once per
overrun, not on a line for every run skipped (APScheduler's own, twice a second for
``placement.follow``: 82 lines in 50 s of a stall)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from controlplane.jobs import build_scheduler

EVERY_S = 0.05


def _wait_until(condition: threading.Event | None = None, *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (condition is not None and condition.is_set()):
        time.sleep(0.01)


def test_a_job_that_overruns_many_of_its_runs_is_said_once_per_overrun(
        caplog: pytest.LogCaptureFixture) -> None:
    stalled, released, started = threading.Event(), threading.Event(), threading.Event()

    def follow() -> None:
        started.set()
        if stalled.is_set():
            released.wait(10)

    scheduler = build_scheduler({"placement.follow": (follow, EVERY_S)})
    caplog.set_level(logging.INFO)
    scheduler.start()
    try:
        for _ in range(2):  # two stalls, each many runs long
            released.clear()
            stalled.set()
            started.clear()
            _wait_until(started, seconds=5)
            _wait_until(seconds=20 * EVERY_S)  # about 20 runs skipped
            stalled.clear()
            released.set()
            _wait_until(seconds=5 * EVERY_S)  # it returns and runs again
    finally:
        released.set()
        scheduler.shutdown(wait=True)
    skipped_lines = [r for r in caplog.records if r.name.startswith("apscheduler")
                     and "maximum number of running instances" in r.getMessage()]
    overruns = [r for r in caplog.records if r.getMessage() == "job.overran"]
    assert skipped_lines == []
    assert [(r.levelname, r.job_id) for r in overruns] == [  # type: ignore[attr-defined]
        ("WARNING", "placement.follow")] * 2
