"""Helpers for driving the `headroom` console script in subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from controlplane.domain.lease import LeaseRecord
from controlplane.fleet_lease import FLEET_LEASE
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.lease import SqlLeaseStore
from tests.warm_cli import WARM_HEADROOM as WARM_HEADROOM

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


def headroom_on_store(url: str, *args: str, cwd: Path | None = None
                      ) -> subprocess.CompletedProcess[str]:
    """``headroom *args`` on the store at ``url`` (``HEADROOM_DB__URL``), output captured."""
    return subprocess.run([*WARM_HEADROOM, *args], env=_env(HEADROOM_DB__URL=url), cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def headroom_as_alice(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``headroom *args`` on the store at ``url``, run by the login name alice (who a pause
    says paused), its tables 250 columns wide; output captured."""
    return subprocess.run([*WARM_HEADROOM, *args], env=_env(HEADROOM_DB__URL=url, COLUMNS="250",
                                                       USER="alice", LOGNAME="alice"),
                          capture_output=True, text=True, timeout=120)


def demo_on_store(url: str, cwd: Path) -> dict[str, Any]:
    """``headroom demo`` for 20 minutes from 2026-12-03 08:00 UTC on the store at ``url``: its
    ``--json`` summary (the run must succeed)."""
    ran = headroom_on_store(url, "demo", "--minutes", "20", "--no-dashboard", "--json",
                            "--start", "2026-12-03T08:00:00Z", cwd=cwd)
    assert ran.returncode == 0, ran.stderr
    summary: dict[str, Any] = json.loads(ran.stdout)
    return summary


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


def simulated_store(tmp_path: Path, clock_at: datetime) -> tuple[Path, datetime]:
    """A demo's store ``tmp_path/sim.db`` (its ``sim-fleet`` lease row, the demo's models)
    whose simulated clock ticked at ``clock_at``, and that tick's time: the store's now."""
    path = tmp_path / "sim.db"
    settings = load_settings(db={"url": f"sqlite:///{path}"}, sim={"history_s": 3600})
    runtime = SimRuntime.open(settings, Store.open(f"sqlite:///{path}", migrate=True), clock_at)
    runtime.advance(60)
    SqlLeaseStore(runtime.store.engine).create_lease(
        FLEET_LEASE, LeaseRecord("demo", 15, clock_at, clock_at, 0, "1"))
    tick_at = runtime.store.last_tick_at()
    assert tick_at is not None
    runtime.store.engine.dispose()
    return path, tick_at




def headroom_status(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`headroom status ARGS` on the store at ``url``, 200 columns wide."""
    return subprocess.run([*WARM_HEADROOM, "status", *args],
                          env=_env(HEADROOM_DB__URL=url, COLUMNS="200"),
                          capture_output=True, text=True, timeout=120)


def status_json(url: str) -> dict[str, Any]:
    """`headroom status --json` on the store at ``url``, parsed (it must not crash)."""
    run = headroom_status(url, "--json")
    assert "Traceback" not in run.stderr, run.stderr
    doc: dict[str, Any] = json.loads(run.stdout)
    return doc


def only_failure_document(run: subprocess.CompletedProcess[str]) -> bool:
    """Whether a failed ``--json`` run printed nothing on stdout but its failure document: its
    exit code and the text of each of its ``error:`` lines (``controlplane.cli.json_errors``)."""
    errors = [line.removeprefix("error: ") for line in run.stderr.splitlines()
              if line.startswith("error: ")]
    return bool(run.stdout) and json.loads(run.stdout) == {
        "ok": False, "exit_code": run.returncode, "errors": errors}


#: `headroom placement serve` run from the source tree
PLACEMENT_SERVE = [sys.executable, "-c", "from controlplane.cli.placement import app; app()",
                   "serve"]


def tls_files(tmp_path: Path, ca: Any, token: str) -> dict[str, Path]:
    """A server certificate for 127.0.0.1 / localhost signed by ``ca`` (a ``trustme.CA``), its
    key and a token file holding ``token``: the files `placement serve --tls-cert --tls-key
    --token-file` read, as ``cert``, ``key`` and ``token``."""
    cert = ca.issue_cert("127.0.0.1", "localhost")
    files = {"cert": tmp_path / "tls.crt", "key": tmp_path / "tls.key",
             "token": tmp_path / "token"}
    files["cert"].write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
    files["key"].write_bytes(cert.private_key_pem.bytes())
    files["token"].write_text(token + "\n")
    return files
