"""deploy/grafana: the dashboard and its ConfigMap are rendered from the panels' script, the
panels tile Grafana's 24-column grid without overlap, they name only metrics Headroom exposes,
and every query of every panel runs on a real Prometheus scraping what ``headroom serve``
exposes (the simulated fleet's loop and the placement API on one registry) and returns series."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from exposed_metrics import exposed_names
from prometheus_api_client import PrometheusConnect

from controlplane.adapters.clock import WallClock
from controlplane.domain.fleet_pause import FleetPause
from controlplane.domain.tick import TickReport
from controlplane.placement_api import journaled_engine, served_metrics
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.server import create_server, stop
from tests.forecasting.promserver import prometheus

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
DASHBOARD = json.loads((GRAFANA / "headroom-dashboard.json").read_text())
T0 = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
SLOW = DEMO_MODELS[0].name
PAUSED = FleetPause(T0, "alice", "incident 4711")


def _charts() -> list[dict[str, Any]]:
    return [p for p in DASHBOARD["panels"] if p["type"] != "row"]


def _queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target, Grafana's variables as "All" and a 1 m rate."""
    return [(p["title"], t["expr"].replace("$model", ".*").replace("$__rate_interval", "1m"))
            for p in _charts() for t in p["targets"]]


def test_the_dashboard_and_its_configmap_are_rendered_from_the_panels() -> None:
    checked = subprocess.run([sys.executable, str(GRAFANA / "render_dashboard.py"), "--check"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stderr
    configmap = yaml.safe_load((GRAFANA / "headroom-dashboard-configmap.yaml").read_text())
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["headroom-dashboard.json"]) == DASHBOARD


def test_the_panels_tile_the_grid_without_overlap_and_each_has_a_unique_id() -> None:
    taken: set[tuple[int, int]] = set()
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                 for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not cells & taken, panel["title"]
        taken |= cells
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    assert all(t["datasource"]["uid"] == "${datasource}" for p in _charts() for t in p["targets"])


def test_every_metric_the_panels_name_is_one_headroom_exposes() -> None:
    exposed = exposed_names()
    named = {m for _, expr in _queries() for m in re.findall(r"\bheadroom_[a-z0-9_]+", expr)}
    assert len(named) >= 25
    assert named <= exposed, named - exposed


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[int, SimRuntime, pb_grpc.PlacementStub]]:
    """The simulated fleet's loop and the placement API with metrics on one registry, as
    ``headroom serve`` runs them: the /metrics port, the runtime and a placement stub. Its
    ticks also read queues and KV caches (as Kubernetes with the vLLM preset does; the
    simulator reads neither), so that those panels have series too, the first model's latency
    is far above its SLO and the fleet is paused."""
    settings = load_settings(db={"url": f"sqlite:///{tmp_path / 'serve.db'}"},
                             placement={"metrics_listen": "127.0.0.1:0"})
    store = Store.open(settings.db.url, migrate=True)
    engine = journaled_engine(store, WallClock())
    runtime = SimRuntime.open(settings, store, T0, engine=engine)
    metrics = served_metrics(settings)
    assert metrics.loop is not None

    def record(report: TickReport, saved: bool) -> None:
        assert metrics.loop is not None
        models = tuple(replace(m, queued_requests=2.0, kv_cache_usage=0.4,
                               latency_ms=m.latency_ms if m.name != SLOW else 1e6)
                       for m in report.observed.models)
        metrics.loop.record(replace(report, observed=replace(report.observed, models=models),
                                    fleet_pause=PAUSED), saved)

    runtime.on_tick = record
    server, port = create_server("127.0.0.1:0", engine, metrics=metrics.placement)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield int(metrics.url.rsplit(":", 1)[1].split("/")[0]), runtime, \
            pb_grpc.PlacementStub(channel)
    finally:
        channel.close()
        stop(server, grace_s=1.0)
        metrics.stop()


@pytest.mark.prometheus
def test_every_panels_queries_return_series_from_a_prometheus_scraping_headroom_serve(
        tmp_path: Path, serving: tuple[int, SimRuntime, pb_grpc.PlacementStub]) -> None:
    metrics_port, runtime, stub = serving
    interval_s = runtime.settings.reconcile.interval_s
    runtime.advance(3 * interval_s)
    with pytest.raises(grpc.RpcError, match="no_idle_gpus"):  # counted as a rejection
        stub.Place(pb.PlaceRequest(workload_id="too-big", model="m", tenant="t", num_gpu=64,
                                   gpu_milli=1000, cpu_milli=1000, memory_mib=1024), timeout=5)
    with prometheus(tmp_path / "prom", (), scrape=[f"127.0.0.1:{metrics_port}"]) as url:
        prom = PrometheusConnect(url=url, disable_ssl=True)
        tick_p99 = ("histogram_quantile(0.99, sum by (le) "
                    "(rate(headroom_reconcile_tick_seconds_bucket[1m])))")
        empty: list[str] = []
        ticks: list[dict[str, Any]] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            runtime.advance(interval_s)  # counters and histograms grow between scrapes
            stub.GetPlan(pb.GetPlanRequest(), timeout=5)
            empty = [f"{title}: {q}" for title, q in _queries() if not prom.custom_query(q)]
            # a rate reads a number once a tick fell between two scrapes: NaN until then
            ticks = prom.custom_query(tick_p99)
            if not empty and ticks and float(ticks[0]["value"][1]) >= 0.0:
                break
            time.sleep(1.0)
        assert not empty, empty
        short = next(q for title, q in _queries() if title == "Models short of their SLO")
        assert float(prom.custom_query(short)[0]["value"][1]) >= 1  # SLOW, not vector(0)
        paused = next(q for title, q in _queries() if title == "Fleet paused for")
        [series] = prom.custom_query(paused)
        assert series["metric"]["paused_by"] == "alice"
        assert float(series["value"][1]) >= 0.0  # since T0 on the wall clock: before now
        # a rate over series that grew between scrapes reads a number, not NaN
        assert float(ticks[0]["value"][1]) >= 0.0
