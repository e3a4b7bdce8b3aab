"""The Kubernetes backend's load from a real Prometheus (Debian package, backfilled with
promtool): each model's measured request rate and its ready capacity land in ObservedState, and
a model Prometheus cannot measure is unknown for the tick, never a stored or sized 0."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apiserver import ApiServer
from k8s_builders import gpu_node, k8s_settings, model_deployment, nodepool
from k8s_harness import make_backend
from kubernetes import client
from pydantic import SecretStr

from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.adapters.placement import LocalPlacementClient
from controlplane.adapters.prometheus import PrometheusLoad, per_replica_rps, prometheus_source
from controlplane.domain.demand import DEMAND_UNMEASURED
from controlplane.reconcile import ReconcileDeps, reconcile_once
from controlplane.reconcile_config import reconcile_config
from controlplane.settings_cluster import PrometheusSettings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.ledger import SqlForecastLedger
from forecaster.sources.promql import PRESETS
from scheduler.engine import PlacementEngine
from tests.forecasting.promserver import OPS_HASH, Family, free_port, prometheus

pytestmark = pytest.mark.prometheus
LLAMA, RESNET = "llama-3-8b-chat", "resnet50-vision"  # 40 and 250 rps per replica
SPECS = tuple(s for s in DEMO_MODELS if s.name in (LLAMA, RESNET))
NOW = int(time.time())
LLAMA_RPS = 30.0
STOPPED_WINDOW_S = 3600  # a long rate window still gives a rate after the scrapes stopped


def live_counter(rps: float, stopped_s: int = -3600, now: int = NOW) -> list[tuple[float, float]]:
    """``rps`` from an hour before ``now`` to an hour after it (Prometheus answers "now"), or
    until ``stopped_s`` before it (scraping stopped then)."""
    return [(float(t), rps * (t - now + 3600)) for t in range(now - 3600, now - stopped_s, 15)]


def families() -> list[Family]:  # no series for resnet50-vision
    return [Family("nv_inference_request_success", {f'model="{LLAMA}",version="1"':
                                                    live_counter(LLAMA_RPS)})]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prometheus(tmp_path_factory.mktemp("load"), families()) as url:
        yield url


@pytest.fixture(scope="module")
def guarded_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prometheus(tmp_path_factory.mktemp("guarded"), families(),
                    basic_auth=("ops", OPS_HASH)) as url:
        yield url


@pytest.fixture(scope="module")
def stopped_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prometheus that stopped scraping llama 10 minutes before it started (not before the
    module was imported: under load a test may run many minutes later; its tests read an
    hour's rate window, so the stopped samples stay in it for some 50 minutes)."""
    counter = live_counter(LLAMA_RPS, stopped_s=600, now=int(time.time()))
    stopped = Family("nv_inference_request_success", {f'model="{LLAMA}",version="1"': counter})
    with prometheus(tmp_path_factory.mktemp("stopped"), [stopped]) as url:
        yield url


def reconcile_deps(backend: K8sBackend, store: Store, clock: VirtualClock) -> ReconcileDeps:
    """The reconcile loop on the Kubernetes backend and ``store``, placing in process."""
    return ReconcileDeps(clock=clock, reader=backend.reader, node_pools=backend.node_pools,
                         replicas=backend.replicas,
                         placement=LocalPlacementClient(PlacementEngine()), forecasts=store,
                         decisions=store, history=store, ledger=SqlForecastLedger(store.engine))


def seed(server: ApiServer) -> None:
    server.seed(nodepool("a100-80gb"))
    server.seed(gpu_node("a100-1"))
    server.seed(model_deployment(LLAMA, replicas=3, ready=2))
    server.seed(model_deployment(RESNET, replicas=2, ready=2))


def now_clock() -> VirtualClock:
    return VirtualClock(datetime.fromtimestamp(int(time.time()), UTC))


def load_from(settings: PrometheusSettings) -> PrometheusLoad:
    return PrometheusLoad(prometheus_source(settings), per_replica_rps(SPECS))


def test_each_models_measured_rate_and_ready_capacity_land_in_the_observed_state(
        apiserver: ApiServer, prom_url: str) -> None:
    seed(apiserver)
    load = load_from(PrometheusSettings(url=prom_url))
    observed = make_backend(apiserver, now_clock(), load=load).reader.snapshot()
    llama, resnet = observed.model(LLAMA), observed.model(RESNET)
    assert llama is not None and resnet is not None
    assert llama.demand_measured and llama.demand_rps == pytest.approx(LLAMA_RPS)
    assert llama.capacity_rps == 2 * 40.0  # ready replicas x the spec's best throughput
    assert (resnet.demand_measured, resnet.capacity_rps) == (False, 2 * 250.0)
    assert (f"{RESNET}: demand not measured this tick: Prometheus at {prom_url} returned no "
            f"series for model '{RESNET}' (query {PRESETS['triton'].grouped(120)})") \
        in observed.notes


def test_the_snapshot_dates_its_data_by_the_newest_sample_of_each_rate(
        apiserver: ApiServer, prom_url: str) -> None:
    seed(apiserver)
    clock = now_clock()
    observed = make_backend(apiserver, clock, load=load_from(
        PrometheusSettings(url=prom_url))).reader.snapshot()
    assert observed.data_at is not None
    # scraped every 15 s: the newest sample is under 15 s old at the tick (to the second: a
    # subquery's aligned steps would miss the samples after its last step)
    assert 0 <= (clock.now() - observed.data_at).total_seconds() < 15


def test_a_rate_whose_newest_sample_is_ten_minutes_old_is_not_measured_this_tick(
        apiserver: ApiServer, stopped_url: str) -> None:
    seed(apiserver)
    clock = now_clock()
    observed = make_backend(apiserver, clock, load=load_from(
        PrometheusSettings(url=stopped_url, rate_window_s=STOPPED_WINDOW_S))).reader.snapshot()
    llama = observed.model(LLAMA)
    # the long window still gives Prometheus a rate (extrapolated from samples at least 10
    # minutes old): it is no measurement of now
    assert llama is not None and not llama.demand_measured
    assert any(note.startswith(f"{LLAMA}: demand not measured this tick: its newest sample is ")
               and "has Prometheus stopped scraping it?" in note for note in observed.notes)
    assert observed.data_at is None  # no rate left that rests on old samples


def test_a_prometheus_that_stopped_scraping_one_model_ten_minutes_ago_holds_that_model_only(
        apiserver: ApiServer, stopped_url: str, sqlite_url: str) -> None:
    seed(apiserver)
    clock = now_clock()
    backend = make_backend(apiserver, clock, load=load_from(
        PrometheusSettings(url=stopped_url, rate_window_s=STOPPED_WINDOW_S)))
    store = Store.open(sqlite_url, migrate=True)
    store.upsert_models(SPECS)
    deps = reconcile_deps(backend, store, clock)
    report = reconcile_once(deps, reconcile_config(k8s_settings(), SPECS))
    assert report.status.value == "applied"  # the tick goes on for every model
    demand = next(d for d in report.demands if d.model == LLAMA)
    assert demand.reason == DEMAND_UNMEASURED  # held, sized from no stale rate
    history = store.rate_history(LLAMA, clock.now() - timedelta(minutes=5),
                                 clock.now() + timedelta(minutes=1), 60)
    assert all(math.isnan(v) for v in history.values)  # the stale rate is not history


def test_basic_auth_from_the_settings_reads_the_rate(apiserver: ApiServer,
                                                      guarded_url: str) -> None:
    seed(apiserver)
    load = load_from(PrometheusSettings(url=guarded_url, username="ops",
                                        password=SecretStr("s3cret")))
    llama = make_backend(apiserver, now_clock(), load=load).reader.snapshot().model(LLAMA)
    assert llama is not None and llama.demand_rps == pytest.approx(LLAMA_RPS)


def test_a_wrong_password_leaves_the_demand_unknown_with_a_note_that_hides_it(
        apiserver: ApiServer, guarded_url: str) -> None:
    seed(apiserver)
    load = load_from(PrometheusSettings(url=guarded_url, username="ops",
                                        password=SecretStr("wrong-pw")))
    observed = make_backend(apiserver, now_clock(), load=load).reader.snapshot()
    assert [m.demand_measured for m in observed.models] == [False, False]
    note = next(n for n in observed.notes if n.startswith(f"{LLAMA}: demand not measured"))
    assert f"Prometheus at {guarded_url} rejected the query" in note
    assert "HTTP Status Code 401" in note and "the credentials were refused" in note
    assert all("wrong-pw" not in n for n in observed.notes)


def test_with_prometheus_stopped_the_tick_runs_notes_it_and_neither_stores_nor_sizes_a_zero(
        apiserver: ApiServer, kube: client.ApiClient, store_url: str, tmp_path: Path) -> None:
    seed(apiserver)
    down = f"http://ops:s3cret@127.0.0.1:{free_port()}"
    settings = k8s_settings().model_copy(update={
        "autoscaling": k8s_settings().autoscaling.model_copy(update={"policy": "reactive"})})
    clock = now_clock()
    backend = make_backend(apiserver, clock, load=load_from(PrometheusSettings(url=down,
                                                                               timeout_s=2)))
    assert backend.elector.try_acquire_or_renew(clock.now())
    store = Store.open(store_url, migrate=True)
    store.upsert_models(SPECS)
    deps = reconcile_deps(backend, store, clock)
    report = reconcile_once(deps, reconcile_config(settings, SPECS))
    assert report.status.value == "applied", report.reason
    shown = down.replace("ops:s3cret@", "ops:***@")
    assert f"{LLAMA}: demand not measured this tick: Prometheus at {shown} is unreachable " \
        in "\n".join(report.observed.notes)
    assert not any("s3cret" in n for n in report.observed.notes)
    # the reactive policy would size a measured 0 down to nothing; unknown holds what is ready
    by_model = {d.model: d for d in report.demands}
    assert {m: (d.reason, d.rate_rps) for m, d in by_model.items()} == {
        LLAMA: (DEMAND_UNMEASURED, 80.0), RESNET: (DEMAND_UNMEASURED, 500.0)}
    replicas = {}
    for deployment in client.AppsV1Api(kube).list_deployment_for_all_namespaces().items:
        assert deployment.metadata is not None and deployment.spec is not None
        replicas[deployment.metadata.name] = deployment.spec.replicas
    assert replicas == {"llama-3-8b-chat": 3, "resnet50-vision": 2}
    # no observation row: the history the forecast reads has a gap there, not a 0
    since = clock.now() - timedelta(minutes=5)
    history = store.rate_history(LLAMA, since, clock.now() + timedelta(minutes=1), 60)
    assert all(math.isnan(v) for v in history.values)
    last = store.last_observed()
    assert last is not None and not any(m.demand_measured for m in last.models)
