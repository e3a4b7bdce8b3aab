"""Helpers for driving the `headroom` console script in subprocesses."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator

HEADROOM = [sys.executable, "-c", "from controlplane.cli import main; main()"]


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A port of 127.0.0.1 that a listening socket holds for the block."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: set per test by tests/conftest.py: a command's fitted forecaster state goes to the test's
#: directory, not the working directory's .headroom/
STATE_DIR_VARIABLE = "HEADROOM_FORECAST__STATE_DIR"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HEADROOM_") or k == STATE_DIR_VARIABLE}
    env["HEADROOM_PLACEMENT__LISTEN"] = f"127.0.0.1:{_free_port()}"
    return {**env, **extra}


def _wait_for(predicate: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(0.3)
    raise AssertionError(f"condition not met within {timeout_s} s")


