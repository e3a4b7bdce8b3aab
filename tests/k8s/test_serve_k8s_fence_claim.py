"""A `headroom serve` replica that takes the Lease over claims its term's fencing token at once,
not at its first save: with ticks an hour apart and no forecast refresh, the new leader has
saved nothing, yet a late save of the deposed leader's would already be refused."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import yaml
from apiserver import ApiServer
from sqlalchemy import text
from test_serve_k8s_tick_writer import (
    HEADROOM,
    _env,
    _holder,
    _stop,
    _wait_until,
    _writers,
    serve_setup,
    stop_both,
)

from controlplane.store import Store
from tests.forecasting.promserver import free_port


def _quiet_replica(tmp_path: Path, identity: str, db_url: str, kube: Path,
                   prometheus_url: str) -> tuple[subprocess.Popen[str], int]:
    """A replica whose jobs save nothing after their first run: a tick an hour, forecasts left
    to scheduled jobs; its placement API's port."""
    port = free_port()
    config = tmp_path / f"{identity}.yaml"
    config.write_text(yaml.safe_dump({
        "backend": "kubernetes", "db": {"url": db_url},
        "placement": {"listen": f"127.0.0.1:{port}"},
        "reconcile": {"interval_s": 3600, "max_staleness_s": 7200},
        "forecast": {"history_s": 86400, "method": "level", "refresh_in_serve": False},
        "k8s": {"kubeconfig": str(kube), "identity": identity, "lease_duration_s": 6,
                "renew_deadline_s": 4},
        "prometheus": {"url": prometheus_url},
    }))
    return subprocess.Popen([*HEADROOM, "serve", "--config", str(config)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), port


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _fence(store: Store) -> tuple[int, str] | None:
    with store.engine.connect() as connection:
        row = connection.execute(text("SELECT token, holder FROM tick_fences")).first()
    return None if row is None else (int(row[0]), str(row[1]))


def test_a_replica_that_takes_the_lease_over_claims_the_next_token_before_it_saves_anything(
        tmp_path: Path, apiserver: ApiServer) -> None:
    db_url, store, kube, prometheus_url = serve_setup(tmp_path, apiserver)
    first, _ = _quiet_replica(tmp_path, "headroom-a", db_url, kube, prometheus_url)
    second: subprocess.Popen[str] | None = None
    try:
        _wait_until(lambda: _fence(store) == (1, "headroom-a"), "headroom-a claimed token 1")
        second, port = _quiet_replica(tmp_path, "headroom-b", db_url, kube, prometheus_url)
        _wait_until(lambda: _listening(port), "headroom-b serves its placement API")
        time.sleep(3)  # its jobs' first runs are over, as a standby's: it saved nothing
        assert _writers(store) == ["headroom-a"]
        stderr = _stop(first)  # SIGTERM: it hands the Lease back
        assert first.returncode == 0, stderr
        _wait_until(lambda: _holder(apiserver) == "headroom-b", "headroom-b took the Lease")
        _wait_until(lambda: _fence(store) == (2, "headroom-b"), "headroom-b claimed token 2",
                    timeout_s=20)
        assert "headroom-b" not in _writers(store)  # claimed before it saved any tick
    finally:
        stop_both(first, second, store)
