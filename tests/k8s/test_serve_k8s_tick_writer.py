"""Two `headroom serve` replicas on one store under Kubernetes Lease leader election: each tick
is recorded as written by the Lease holder identity of the replica that led, and after a
takeover `headroom status` names the new leader and says when leadership changed. The placement
journal names the replica that changed it last by the same identity, and each replica's term
claimed the next fencing token of the tick records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import yaml
from apiserver import ApiServer
from serve_apiserver import kubeconfig
from sqlalchemy import select, text
from sqlmodel import SQLModel

from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.tables import TickRecord
from tests.forecasting.promserver import free_port
from tests.httpstub import send_json, serve
from tests.warm_cli import WARM_HEADROOM

HEADROOM = [sys.executable, "-c", "from controlplane.cli import main; main()"]
TICKS = SQLModel.metadata.tables[str(TickRecord.__tablename__)]


def _empty_prometheus() -> str:
    """A Prometheus that knows no series (every query answers at once with none)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def _answer(self) -> None:
            kind = "matrix" if "query_range" in self.path else "vector"
            send_json(self, 200, json.dumps({"status": "success", "data": {
                "resultType": kind, "result": []}}).encode())

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

    httpd = serve(Handler)
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def _env() -> dict[str, str]:  # the test's forecaster state dir (tests/conftest.py) is kept
    return {k: v for k, v in os.environ.items()
            if not k.startswith("HEADROOM_") or k == "HEADROOM_FORECAST__STATE_DIR"}


def serve_setup(tmp_path: Path, apiserver: ApiServer) -> tuple[str, Store, Path, str]:
    """A SQLite store with one model, a kubeconfig for ``apiserver`` and a Prometheus that knows
    no series: the store's URL, the store, the kubeconfig's path, Prometheus' URL."""
    db_url = f"sqlite:///{tmp_path / 'serve.db'}"
    store = Store.open(db_url, migrate=True)
    store.upsert_models(DEMO_MODELS[:1])
    kube = tmp_path / "kubeconfig"
    kube.write_text(yaml.safe_dump(kubeconfig(apiserver.url)))
    return db_url, store, kube, _empty_prometheus()


def _replica(tmp_path: Path, identity: str, db_url: str, kube: Path,
             prometheus_url: str) -> subprocess.Popen[str]:
    config = tmp_path / f"{identity}.yaml"
    config.write_text(yaml.safe_dump({
        "backend": "kubernetes", "db": {"url": db_url},
        "placement": {"listen": f"127.0.0.1:{free_port()}"},
        "reconcile": {"interval_s": 1},
        "forecast": {"history_s": 86400, "method": "level"},
        "k8s": {"kubeconfig": str(kube), "identity": identity, "lease_duration_s": 6,
                "renew_deadline_s": 4},
        "prometheus": {"url": prometheus_url},
    }))
    return subprocess.Popen([*HEADROOM, "serve", "--config", str(config)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _holder(apiserver: ApiServer) -> str | None:
    lease = apiserver.find("coordination.k8s.io/v1", "Lease", "headroom-leader", "headroom")
    return None if lease is None else lease["spec"].get("holderIdentity") or ""


def _writers(store: Store) -> list[str | None]:
    with store.engine.connect() as connection:
        return list(connection.execute(select(TICKS.c.writer).order_by(TICKS.c.id)).scalars())


def _wait_until(done: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    return stderr


def stop_both(first: subprocess.Popen[str], second: subprocess.Popen[str] | None,
              store: Store) -> None:
    """Stop both replicas (the second, once started, must stop cleanly) and close the store."""
    for proc in (first, second):
        if proc is not None:
            _stop(proc)
    assert second is not None and second.returncode == 0
    store.engine.dispose()


def test_ticks_and_the_placement_journal_name_the_lease_holder_and_status_shows_the_takeover(
        tmp_path: Path, apiserver: ApiServer) -> None:
    db_url, store, kube, prometheus_url = serve_setup(tmp_path, apiserver)
    first = _replica(tmp_path, "headroom-a", db_url, kube, prometheus_url)
    second: subprocess.Popen[str] | None = None
    try:
        _wait_until(lambda: _holder(apiserver) == "headroom-a" and len(_writers(store)) >= 2,
                    "headroom-a holds the Lease and recorded two ticks")
        second = _replica(tmp_path, "headroom-b", db_url, kube, prometheus_url)
        time.sleep(3)  # the standby runs beside the leader: it records nothing
        assert set(_writers(store)) == {"headroom-a"}
        stderr = _stop(first)  # SIGTERM: it hands the Lease back
        assert first.returncode == 0, stderr
        _wait_until(lambda: _holder(apiserver) == "headroom-b"
                    and "headroom-b" in _writers(store), "headroom-b took over and ticked")
        writers = _writers(store)
        led_by_a = writers.index("headroom-b")
        assert led_by_a >= 2
        assert writers[:led_by_a] == ["headroom-a"] * led_by_a
        assert set(writers[led_by_a:]) == {"headroom-b"} and writers[-1] == _holder(apiserver)
        # each took the Lease once and claimed the next fencing token of the tick records:
        # a late save of headroom-a's would now be refused (store/tick_fence.py)
        with store.engine.connect() as connection:
            assert connection.execute(text("SELECT token, holder FROM tick_fences")).one() == (
                2, "headroom-b")
        run = subprocess.run([*WARM_HEADROOM, "status", "--json", "--max-tick-age-s", "600"],
                             env={**_env(), "HEADROOM_DB__URL": db_url}, capture_output=True,
                             text=True, timeout=120)
        doc = json.loads(run.stdout)
        assert doc["last_tick"]["written_by"] == "headroom-b"
        change = doc["leadership_change"]
        assert (change["from"], change["to"], change["first_tick_id"]) == (
            "headroom-a", "headroom-b", led_by_a + 1)
        assert change["previous_tick_at"] < change["at"]
        # the placement journal names the replica that changed it as its Lease does
        assert doc["placement"]["changed_by"] == "headroom-b"
    finally:
        stop_both(first, second, store)
