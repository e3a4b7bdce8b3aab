"""``WARM_HEADROOM`` (tests/warm_cli.py), which most CLI tests run their short commands with, is
the real command: the same output, exit code and behaviour under a timeout or Ctrl-C as a fresh
``python -c 'from controlplane.cli import main; main()'``, whether it forks from the warm server
or, without one, execs the fresh interpreter itself."""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
from clihelpers import HEADROOM, WARM_HEADROOM, _env, _wait_for

from controlplane.store import Store
from tests.warm_cli import SOCKET_VARIABLE


def _both(args: list[str], cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    return tuple(subprocess.run([*command, *args], env=_env(**env), cwd=cwd, capture_output=True,
                                text=True, timeout=120) for command in (HEADROOM, WARM_HEADROOM))


@pytest.mark.parametrize(("args", "columns"), [
    (["--version"], "80"),
    (["--help"], "60"),
    (["models", "--help"], "140"),
    (["no-such-command"], "80"),
    (["models", "list", "--db", "store.db"], "80"),
    (["status", "--db", "store.db", "--max-tick-age-s", "60"], "100"),
    (["models", "import", "missing.yaml", "--db", "store.db"], "80"),
])
def test_a_warm_command_prints_and_exits_as_a_fresh_one(
        tmp_path: Path, args: list[str], columns: str) -> None:
    Store.open(f"sqlite:///{tmp_path / 'store.db'}", migrate=True).engine.dispose()
    fresh, warm = _both(args, tmp_path, COLUMNS=columns)
    assert (warm.returncode, warm.stdout, warm.stderr) == (
        fresh.returncode, fresh.stdout, fresh.stderr)
    assert fresh.stdout or fresh.stderr


def test_a_warm_command_forks_from_the_server_and_without_one_starts_afresh(
        tmp_path: Path) -> None:
    # a fresh interpreter runs sitecustomize from PYTHONPATH; a fork of the warm one does not
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nprint('fresh interpreter', file=sys.stderr)\n")
    env = _env(PYTHONPATH=str(tmp_path))
    warm = subprocess.run([*WARM_HEADROOM, "--version"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert warm.returncode == 0 and "fresh interpreter" not in warm.stderr
    del env[SOCKET_VARIABLE]
    fallback = subprocess.run([*WARM_HEADROOM, "--version"], env=env, capture_output=True,
                              text=True, timeout=60)
    assert fallback.returncode == 0 and "fresh interpreter" in fallback.stderr
    assert fallback.stdout == warm.stdout


def _last_tick_at(db: Path) -> datetime | None:
    """The newest tick's simulated time in the demo's store at ``db`` (None: none yet)."""
    if not db.exists():
        return None
    store = Store.open(f"sqlite:///{db}")
    try:
        return store.last_tick_at()
    finally:
        store.engine.dispose()


def test_a_warm_command_whose_client_is_killed_stops_running(tmp_path: Path) -> None:
    # subprocess.run's timeout kills the client (SIGKILL): the command must not outlive it
    db = tmp_path / "demo.db"
    live = subprocess.Popen([*WARM_HEADROOM, "demo", "--speed", "120", "--no-dashboard", "--db",
                             str(db)], env=_env(), cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _last_tick_at(db) is not None, 60)
    finally:
        live.kill()
        live.wait()
    time.sleep(1)
    ticked_at = _last_tick_at(db)
    time.sleep(2)  # at speed 120 a running demo ticks every 0.25 s
    assert _last_tick_at(db) == ticked_at


def test_ctrl_c_stops_a_warm_command_as_it_stops_a_fresh_one(tmp_path: Path) -> None:
    codes = []
    for command, db in ((HEADROOM, tmp_path / "fresh.db"), (WARM_HEADROOM, tmp_path / "warm.db")):
        live = subprocess.Popen([*command, "demo", "--speed", "120", "--no-dashboard", "--db",
                                 str(db)], env=_env(), cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            _wait_for(lambda: _last_tick_at(db) is not None, 60)  # noqa: B023
        finally:
            live.send_signal(signal.SIGINT)
            try:
                _, stderr = live.communicate(timeout=60)
            finally:
                live.kill()
        assert "Traceback" not in stderr
        codes.append(live.returncode)
    assert codes == [0, 0]
