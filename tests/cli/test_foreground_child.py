"""``headroom dashboard`` runs Streamlit as a foreground child: stopping Headroom stops it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from clihelpers import _wait_for

# the child records its pid, exits 3 on SIGTERM or SIGINT, and otherwise sleeps
CHILD = ("import os, signal, sys, time\n"
         "for s in (signal.SIGTERM, signal.SIGINT):\n"
         "    signal.signal(s, lambda *_: sys.exit(3))\n"
         "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
         "time.sleep(600)\n")
PARENT = ("import os, sys\n"
          "from controlplane.cli.child import run_in_foreground\n"
          "sys.exit(run_in_foreground([sys.executable, '-c', sys.argv[1], sys.argv[2]], "
          "os.environ))\n")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_headroom_stops_the_child_and_returns_its_exit_code(
        tmp_path: Path, stop_signal: signal.Signals) -> None:
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(pid_file)],
                              start_new_session=True)
    try:
        _wait_for(lambda: pid_file.read_text(encoding="utf-8"), timeout_s=60)
        child_pid = int(pid_file.read_text(encoding="utf-8"))
        parent.send_signal(stop_signal)
        assert parent.wait(timeout=60) == 3
        assert _gone(child_pid), "the child outlived headroom"
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
