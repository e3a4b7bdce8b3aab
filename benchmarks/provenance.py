"""Where a benchmark's numbers came from: the code, the command, the machine and the minutes.

Every benchmark that writes a results JSON puts ``provenance(started)`` under its
``provenance`` key (``started`` from ``start()`` before the work), so a number in
``benchmarks/results/`` can be traced to a commit and re-run with the same command::

    started = start()
    ...
    doc["provenance"] = provenance(started)

The commit and ``dirty`` (tracked files other than ``benchmarks/results/`` differ from it) are
read at ``start()``, when the code that runs is the code on disk.

Scripts import it as ``benchmarks.provenance`` with the repository root on ``sys.path``.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def start() -> dict[str, Any]:
    """The start time (UTC, ISO 8601), the commit and whether the worktree was dirty: call it
    before the measured work and hand the result to ``provenance``."""
    status = _git("status", "--porcelain", "--untracked-files=no", "--",
                  ".", ":(exclude)benchmarks/results")
    return {"commit": _git("rev-parse", "HEAD"),
            "dirty": None if status is None else bool(status), "started_at": _utc_now()}


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance(started: dict[str, Any]) -> dict[str, Any]:
    """``start()``'s commit, dirty flag and start time, plus the command, the finish time
    (UTC), Python, platform, CPU model and count, and the load average at the finish."""
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = None
    return {
        "commit": started["commit"],
        "dirty": started["dirty"],
        "command": shlex.join(["python", *sys.argv]),
        "started_at": started["started_at"],
        "finished_at": _utc_now(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "load_average_1m_5m_15m": [round(x, 2) for x in os.getloadavg()],
    }
