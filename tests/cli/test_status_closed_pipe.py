"""`headroom status | head -1`: a reader that closes the pipe early does not change the exit code
(exit 1 means a stale fleet to a probe, so a closed pipe must not read as one)."""

from __future__ import annotations

import os
import subprocess

import pytest
from clihelpers import HEADROOM, _env
from test_status_cli import _recent


@pytest.mark.parametrize("output", [(), ("--json",)], ids=["table", "json"])
@pytest.mark.parametrize(("limit_s", "code"), [("600", 0), ("0", 1)], ids=["healthy", "stale"])
def test_a_reader_that_closed_the_pipe_gets_the_exit_code_of_a_full_read_and_no_traceback(
        sqlite_url: str, output: tuple[str, ...], limit_s: str, code: int) -> None:
    _recent(sqlite_url)
    command = [*HEADROOM, "status", "--max-tick-age-s", limit_s, *output]
    env = _env(HEADROOM_DB__URL=sqlite_url, COLUMNS="80")
    full = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert (full.returncode, full.stderr) == (code, "")
    assert full.stdout.strip()
    read_end, write_end = os.pipe()
    os.close(read_end)  # gone before status writes: its first write fails (EPIPE), every time
    try:
        closed = subprocess.run(command, env=env, stdout=write_end, stderr=subprocess.PIPE,
                                text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (closed.returncode, closed.stderr) == (full.returncode, "")
