"""SIGTERM of the `headroom serve` replica that holds the Lease while a job is in flight (here the
forecast refresh a new leader runs at once, whose Prometheus history is slow to come): it stops
leading at once and hands the Lease back as soon as no tick is in flight, so a standby takes
over at its next try, not a lease duration after the refresh ends (or never released at all,
when the refresh outlasts the pod's terminationGracePeriodSeconds and the kubelet kills it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import yaml
from apiserver import ApiServer
from serve_apiserver import kubeconfig

from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from tests.forecasting.promserver import free_port
from tests.httpstub import send_json, serve

HEADROOM = [sys.executable, "-c", "from controlplane.cli import main; main()"]
HISTORY_S = 8.0  # how long the stub takes to answer a history (range) query


class SlowHistory:
    """A Prometheus that answers instant queries at once (no series) and range queries, the
    forecast refresh's history, after HISTORY_S."""

    def __init__(self) -> None:
        self.range_asked = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def _answer(self) -> None:
                ranged = "query_range" in self.path
                if ranged:
                    stub.range_asked.set()
                    time.sleep(HISTORY_S)
                result: dict[str, object] = {"resultType": "matrix" if ranged else "vector",
                                             "result": []}
                send_json(self, 200, json.dumps({"status": "success", "data": result}).encode())

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

        self.httpd = serve(Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


def _env() -> dict[str, str]:  # the test's forecaster state dir (tests/conftest.py) is kept
    return {k: v for k, v in os.environ.items()
            if not k.startswith("HEADROOM_") or k == "HEADROOM_FORECAST__STATE_DIR"}


def _holder(apiserver: ApiServer) -> str | None:
    lease = apiserver.find("coordination.k8s.io/v1", "Lease", "headroom-leader", "headroom")
    return None if lease is None else lease["spec"].get("holderIdentity") or ""


def test_sigterm_during_a_forecast_refresh_hands_the_lease_back_at_once(
        tmp_path: Path, apiserver: ApiServer) -> None:
    db_url = f"sqlite:///{tmp_path / 'serve.db'}"
    Store.open(db_url, migrate=True).upsert_models(DEMO_MODELS[:1])
    prometheus = SlowHistory()
    kube = tmp_path / "kubeconfig"
    kube.write_text(yaml.safe_dump(kubeconfig(apiserver.url)))
    config = tmp_path / "serve.yaml"
    config.write_text(yaml.safe_dump({
        "backend": "kubernetes", "db": {"url": db_url},
        "placement": {"listen": f"127.0.0.1:{free_port()}"},
        "reconcile": {"interval_s": 1},
        "forecast": {"history_s": 86400, "method": "level"},
        "k8s": {"kubeconfig": str(kube), "identity": "serve-a"},
        "prometheus": {"url": prometheus.url, "timeout_s": 60},
    }))
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(config)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert prometheus.range_asked.wait(timeout=60), "the leader's refresh never started"
        assert _holder(apiserver) == "serve-a"
        proc.send_signal(signal.SIGTERM)
        sent_at = time.monotonic()
        while _holder(apiserver) != "" and time.monotonic() - sent_at < HISTORY_S:
            time.sleep(0.1)
        released_after_s = time.monotonic() - sent_at
        _, stderr = proc.communicate(timeout=60)  # it still lets the refresh finish
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        prometheus.httpd.shutdown()
    assert proc.returncode == 0, stderr
    assert released_after_s < 3.0, f"the Lease was released {released_after_s:.1f} s after SIGTERM"
