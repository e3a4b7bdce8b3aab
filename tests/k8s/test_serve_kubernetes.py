"""`headroom serve` with `backend: kubernetes` against the API test server: it takes the Lease,
reconciles and records plans, and hands the Lease back on SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from apiserver import ApiServer
from k8s_builders import gpu_node, gpu_pod, model_deployment
from kubernetes import client
from serve_apiserver import kubeconfig

from controlplane.adapters.k8s.leader import lease_object
from controlplane.cost_reader import configured_prices
from controlplane.domain.lease import LeaseRecord
from controlplane.domain.models import Engine
from controlplane.domain.timestamps import utc_text
from controlplane.settings import Settings, pool_specs
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from forecaster.types import Forecast
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from tests.forecasting.promserver import Family, prometheus
from tests.warm_cli import WARM_HEADROOM

HEADROOM = [sys.executable, "-c", "from controlplane.cli import main; main()"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


NOW = int(time.time())
MODEL_RPS = 12.0


TOKENS_PER_REQUEST = 150.0
VLLM_PER_REQUEST = 2.0


def _counter(per_request: float = 1.0) -> list[tuple[float, float]]:
    """MODEL_RPS (x ``per_request``) from 26 hours before the test to an hour after it
    (Prometheus answers "now")."""
    start = NOW - 26 * 3600
    return [(float(t), per_request * MODEL_RPS * (t - start))
            for t in range(start, NOW + 3600, 30)]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Prometheus with a day of every demo model's request counter: their only history. The
    demo's vLLM models also export vLLM's counter, at VLLM_PER_REQUEST x the rate (what a fleet
    read by its engines' presets sees of them)."""
    series = {f'model="{m.name}",version="1"': _counter() for m in DEMO_MODELS}
    tokens = {f'model="{DEMO_MODELS[0].name}"': _counter(TOKENS_PER_REQUEST)}
    vllm = {f'model_name="{m.name}"': _counter(VLLM_PER_REQUEST) for m in DEMO_MODELS
            if m.engine is Engine.VLLM}
    with prometheus(tmp_path_factory.mktemp("prom"),
                    [Family("nv_inference_request_success", series),
                     Family("generated_tokens_total", tokens),
                     Family("vllm:request_success_total", vllm)]) as url:
        yield url


def _config(tmp_path: Path, apiserver: ApiServer, db_url: str, prom_url: str | None,
            metrics_port: int = 0, identity: str = "serve-test", grpc_port: int = 0,
            dry_run: bool = False, refresh_in_serve: bool = True,
            model_queries: dict[str, dict[str, str]] | None = None,
            by_engine: bool = False) -> Path:
    kube = tmp_path / "kubeconfig"
    kube.write_text(yaml.safe_dump(kubeconfig(apiserver.url)))
    config = tmp_path / f"{identity}.yaml"
    config.write_text(yaml.safe_dump({
        "backend": "kubernetes",
        "db": {"url": db_url},
        "placement": {"listen": f"127.0.0.1:{grpc_port or _free_port()}",
                      "metrics_listen": f"127.0.0.1:{metrics_port}"},
        "reconcile": {"interval_s": 1, "max_staleness_s": 30},
        "forecast": {"history_s": 86400, "method": "level",
                     "refresh_in_serve": refresh_in_serve},
        "k8s": {"kubeconfig": str(kube), "identity": identity},
        **({"safety": {"dry_run": True}} if dry_run else {}),
        **({"prometheus": {"url": prom_url, "model_queries": model_queries or {},
                           "by_engine": by_engine}}
           if prom_url is not None else {}),
    }))
    return config


def _env() -> dict[str, str]:  # the test's forecaster state dir (tests/conftest.py) is kept
    return {k: v for k, v in os.environ.items()
            if not k.startswith("HEADROOM_") or k == "HEADROOM_FORECAST__STATE_DIR"}


def test_serve_takes_the_lease_records_plans_and_releases_on_sigterm(
        tmp_path: Path, apiserver: ApiServer, kube: client.ApiClient, prom_url: str) -> None:
    db_url = f"sqlite:///{tmp_path / 'serve.db'}"
    store = Store.open(db_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    apiserver.seed(model_deployment("bert-embed", replicas=1))
    loading = gpu_pod("bert-embed-0", "l4-1", labels={"app": "bert-embed"}, ready=False,
                      owner_kind="ReplicaSet")
    loading["status"]["conditions"][0]["lastTransitionTime"] = utc_text(datetime.now(UTC))
    apiserver.seed(loading)
    metrics_port = _free_port()
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(_config(
        tmp_path, apiserver, db_url, prom_url, metrics_port))], env=_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    leases = client.CoordinationV1Api(kube)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and store.counts()["plans"] < 2:
            time.sleep(0.5)
        assert store.counts()["plans"] >= 2
        # the leader's loading guard after its ticks: the pod still loading is held
        annotations = apiserver.get("v1", "Pod", "bert-embed-0", "models")["metadata"].get(
            "annotations") or {}
        assert annotations.get("karpenter.sh/do-not-disrupt") == "true"
        # the pools' configured prices, for the Cost and What-if pages
        assert {p.product for p in configured_prices(store.engine)} == {
            pool.product for pool in pool_specs(Settings())}
        lease = leases.read_namespaced_lease("headroom-leader", "headroom")
        assert lease.spec is not None and lease.spec.holder_identity == "serve-test"
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                    timeout=10) as response:
            scraped = response.read().decode()
        # the leader's ticks, recorded on the placement API's metrics endpoint
        applied = re.search(r'^headroom_reconcile_ticks_total{status="applied"} (\S+)$', scraped,
                            re.MULTILINE)
        assert applied is not None and float(applied.group(1)) >= 1  # the series is there at 0
        # and the loading guard's: the pod it holds, and the one guard it began
        assert re.search(r"^headroom_loading_guard_pods 1\.0$", scraped, re.MULTILINE)
        assert re.search(r'^headroom_loading_guard_changes_total{change="guard",'
                         r'reason="loading"} 1\.0$', scraped, re.MULTILINE)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    released = leases.read_namespaced_lease("headroom-leader", "headroom")
    assert released.spec is not None and released.spec.holder_identity in (None, "")


def _placed(stub: pb_grpc.PlacementStub, workload_id: str) -> pb.Binding:
    """Place one whole GPU, retried while the replica has had no inventory yet (before its
    first tick: FAILED_PRECONDITION no_inventory)."""
    request = pb.PlaceRequest(workload_id=workload_id, model="llama", tenant="t", cpu_milli=100,
                              memory_mib=256, num_gpu=1, gpu_milli=1000)
    deadline = time.monotonic() + 60
    while True:
        try:
            return stub.Place(request, timeout=10).binding
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION or (
                    time.monotonic() > deadline):
                raise
            time.sleep(0.5)


def test_two_replicas_on_one_store_never_bind_a_gpu_twice(
        tmp_path: Path, apiserver: ApiServer, prom_url: str) -> None:
    db_url = f"sqlite:///{tmp_path / 'replicas.db'}"
    Store.open(db_url, migrate=True).upsert_models(DEMO_MODELS)
    apiserver.seed(gpu_node("a100-1", gpus=2))
    ports = {name: _free_port() for name in ("replica-a", "replica-b")}
    # dry run: the leader's plan must not re-lay out (cordon) the node the test places on
    procs = [subprocess.Popen([*HEADROOM, "serve", "--config", str(_config(
        tmp_path, apiserver, db_url, prom_url, identity=name, grpc_port=port, dry_run=True))],
        env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, port in ports.items()]
    channels = [grpc.insecure_channel(f"127.0.0.1:{port}") for port in ports.values()]
    try:
        a, b = (pb_grpc.PlacementStub(c) for c in channels)
        for channel in channels:
            grpc.channel_ready_future(channel).result(timeout=60)
        first = _placed(a, "w0")
        second = _placed(b, "w1")  # the other replica: it sees w0's GPU taken
        assert (first.node, second.node) == ("a100-1", "a100-1")
        assert set(first.gpu_indices).isdisjoint(second.gpu_indices)
        with pytest.raises(grpc.RpcError) as err:
            a.Place(pb.PlaceRequest(workload_id="w2", model="llama", tenant="t", num_gpu=1,
                                    gpu_milli=1000), timeout=10)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        b.Release(pb.ReleaseRequest(workload_id="w0"), timeout=10)
        assert _placed(a, "w2").gpu_indices == first.gpu_indices
    finally:
        for channel in channels:
            channel.close()
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        errors = [proc.communicate(timeout=60)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], errors


def test_serve_refuses_an_empty_model_list_with_one_line(tmp_path: Path, apiserver: ApiServer,
                                                        prom_url: str) -> None:
    db_url = f"sqlite:///{tmp_path / 'empty.db'}"
    done = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(_config(tmp_path, apiserver,
                                                                       db_url, prom_url))],
                          env=_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "the store lists no models" in done.stderr and "Traceback" not in done.stderr


def _forbidden_node_lists(apiserver: ApiServer) -> int:
    return sum(1 for r in apiserver.requests
               if r.method == "GET" and r.path == "/api/v1/nodes" and r.status == 403)


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_serve_keeps_ticking_with_one_line_errors_when_rbac_forbids_listing_nodes(
        tmp_path: Path, apiserver: ApiServer, role: str, prom_url: str) -> None:
    db_url = f"sqlite:///{tmp_path / 'forbidden.db'}"
    store = Store.open(db_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    if role == "follower":  # another replica holds the Lease for the whole test
        now = datetime.now(UTC)
        apiserver.seed(lease_object("headroom-leader", "headroom",
                                    LeaseRecord("other", 3600, now, now, 1, "")))
    apiserver.inject_fault("GET", "/api/v1/nodes", 403, times=100_000)
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(_config(
        tmp_path, apiserver, db_url, prom_url))], env=_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _forbidden_node_lists(apiserver) < 3:
            time.sleep(0.2)
        assert proc.poll() is None and _forbidden_node_lists(apiserver) >= 3
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "HTTP 403" in stderr, stderr
    event = "tick.failed" if role == "leader" else "tick.follower_unobserved"
    assert f'"event": "{event}"' in stderr, stderr
    ticks = store.counts()["ticks"]
    assert (ticks >= 2 and store.counts()["plans"] == 0) if role == "leader" else ticks == 0


def test_serve_reports_a_missing_kubeconfig_on_one_line(tmp_path: Path, apiserver: ApiServer,
                                                       prom_url: str) -> None:
    db_url = f"sqlite:///{tmp_path / 'kube.db'}"
    Store.open(db_url, migrate=True).upsert_models(DEMO_MODELS)
    config = _config(tmp_path, apiserver, db_url, prom_url)
    settings = yaml.safe_load(config.read_text())
    missing = tmp_path / "no-such-kubeconfig"
    settings["k8s"]["kubeconfig"] = str(missing)
    config.write_text(yaml.safe_dump(settings))
    done = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(config)], env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"kubeconfig {missing} (k8s.kubeconfig)" in " ".join(done.stderr.split())


def test_serve_without_a_prometheus_url_refuses_on_one_line_before_writing_anything(
        tmp_path: Path, apiserver: ApiServer) -> None:
    db = tmp_path / "stores" / "serve.db"
    done = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(_config(
        tmp_path, apiserver, f"sqlite:///{db}", None))], env=_env(), cwd=tmp_path,
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == ("error: backend: kubernetes reads each model's request rate from "
                           "Prometheus: set prometheus.url (environment "
                           "HEADROOM_PROMETHEUS__URL), e.g. "
                           "http://prometheus-server.monitoring:9090\n")
    assert not db.parent.exists() and not (tmp_path / "forecaster-state").exists()
    assert apiserver.requests == []  # nor asked the cluster anything


def _serve_until_forecast_and_ticked(config: Path, store: Store) -> tuple[
        dict[str, Forecast], str]:
    """``headroom serve`` on ``config`` until every demo model has a forecast in ``store`` and
    a tick is recorded (90 s at most), stopped by SIGTERM and checked to exit 0: the forecasts
    then, and what it wrote to stderr."""
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(config)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and (
                len(store.latest_forecasts()) < len(DEMO_MODELS) or store.counts()["ticks"] < 1):
            time.sleep(0.5)
        forecasts = store.latest_forecasts()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    return forecasts, stderr


def test_serve_forecasts_at_start_from_history_that_only_prometheus_holds_and_ticks_its_load(
        tmp_path: Path, apiserver: ApiServer, prom_url: str) -> None:
    db_url = f"sqlite:///{tmp_path / 'fresh.db'}"
    store = Store.open(db_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    apiserver.seed(model_deployment(DEMO_MODELS[0].name, replicas=2, ready=2))
    assert store.counts()["forecasts"] == 0 and store.last_observed() is None
    forecasts, stderr = _serve_until_forecast_and_ticked(
        _config(tmp_path, apiserver, db_url, prom_url), store)
    assert sorted(forecasts) == sorted(m.name for m in DEMO_MODELS), stderr
    for forecast in forecasts.values():  # a day of 12 rps, none of it in the store
        assert forecast.p50[0] == pytest.approx(MODEL_RPS, rel=0.05)
    observed = store.last_observed()
    assert observed is not None
    model = observed.model(DEMO_MODELS[0].name)
    assert model is not None and model.demand_measured
    assert model.demand_rps == pytest.approx(MODEL_RPS)
    assert model.capacity_rps == 2 * DEMO_MODELS[0].best_point().throughput_rps


def test_serve_reads_and_forecasts_a_model_with_its_own_query_in_its_own_unit(
        tmp_path: Path, apiserver: ApiServer, prom_url: str) -> None:
    """The first demo model scales on its generated tokens (``prometheus.model_queries``), the
    others on the preset's requests; an entry naming no listed model is warned about."""
    db_url = f"sqlite:///{tmp_path / 'tokens.db'}"
    store = Store.open(db_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    tokens_model = DEMO_MODELS[0].name
    apiserver.seed(model_deployment(tokens_model, replicas=2, ready=2))
    own = {"query": 'sum(rate(generated_tokens_total{model="{model}"}[{window}]))',
           "sample_series": 'generated_tokens_total{model="{model}"}'}
    config = _config(tmp_path, apiserver, db_url, prom_url,
                     model_queries={tokens_model: own, "no-such-model": own})
    forecasts, stderr = _serve_until_forecast_and_ticked(config, store)
    assert "warning: prometheus.model_queries.no-such-model: no model 'no-such-model'" in stderr
    tokens_rps = TOKENS_PER_REQUEST * MODEL_RPS
    assert forecasts[tokens_model].p50[0] == pytest.approx(tokens_rps, rel=0.05)
    for model in DEMO_MODELS[1:]:
        assert forecasts[model.name].p50[0] == pytest.approx(MODEL_RPS, rel=0.05)
    observed = store.last_observed()
    assert observed is not None
    measured = observed.model(tokens_model)
    assert measured is not None and measured.demand_measured
    assert measured.demand_rps == pytest.approx(tokens_rps)
    assert not any("no sample time" in note for note in observed.notes)  # its series dates it


def test_serve_by_engine_reads_and_forecasts_each_model_by_its_engines_preset(
        tmp_path: Path, apiserver: ApiServer, prom_url: str) -> None:
    """The demo mixes Triton and vLLM models: with ``prometheus.by_engine`` each is read, in
    its ticks and its forecast's history, by its own engine's counter."""
    db_url = f"sqlite:///{tmp_path / 'engines.db'}"
    store = Store.open(db_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    vllm_model = next(m for m in DEMO_MODELS if m.engine is Engine.VLLM)
    apiserver.seed(model_deployment(vllm_model.name, replicas=2, ready=2))
    forecasts, stderr = _serve_until_forecast_and_ticked(
        _config(tmp_path, apiserver, db_url, prom_url, by_engine=True), store)
    assert {m.engine for m in DEMO_MODELS} == {Engine.VLLM, Engine.TRITON}
    for model in DEMO_MODELS:
        rps = MODEL_RPS * (VLLM_PER_REQUEST if model.engine is Engine.VLLM else 1.0)
        assert forecasts[model.name].p50[0] == pytest.approx(rps, rel=0.05), stderr
    observed = store.last_observed()
    assert observed is not None
    measured = observed.model(vllm_model.name)
    assert measured is not None and measured.demand_measured
    assert measured.demand_rps == pytest.approx(VLLM_PER_REQUEST * MODEL_RPS)


def test_serve_observes_only_the_listed_models_and_names_a_labelled_workload_it_does_not_manage(
        tmp_path: Path, apiserver: ApiServer, prom_url: str) -> None:
    listed, unlisted = DEMO_MODELS[0], DEMO_MODELS[1]  # Prometheus measures both
    db_url = f"sqlite:///{tmp_path / 'unlisted.db'}"
    store = Store.open(db_url, migrate=True)
    store.upsert_models((listed,))
    for model in (listed, unlisted):
        apiserver.seed(model_deployment(model.name, replicas=2, ready=2))
    metrics_port = _free_port()
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(_config(
        tmp_path, apiserver, db_url, prom_url, metrics_port, refresh_in_serve=False))],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and store.counts()["ticks"] < 2:
            time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                    timeout=10) as response:
            scraped = response.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    observed = store.last_observed()
    assert observed is not None and [m.name for m in observed.models] == [listed.name], stderr
    assert [n for n in observed.notes if n.startswith("unmanaged: ")] == [
        f"unmanaged: {unlisted.name} (Deployment models/{unlisted.name}): labelled "
        "headroom.dev/model, not in the models table; Headroom neither measures, sizes nor "
        "scales them (`headroom models import` to manage one, or remove the label)"]
    # a gauge for the listed model only: no capacity-0 one for HeadroomModelShortOfCapacity
    assert f'headroom_model_rps{{kind="capacity",model="{listed.name}"}}' in scraped
    # its SLO beside its latency, for HeadroomModelOverLatencySlo
    assert (f'headroom_model_latency_slo_ms{{model="{listed.name}"}} '
            f'{float(listed.latency_slo_ms)!r}\n') in scraped
    assert f'model="{unlisted.name}"' not in scraped


def test_serve_leaves_the_forecasts_to_scheduled_jobs_when_told_and_says_so_once(
        tmp_path: Path, apiserver: ApiServer, prom_url: str) -> None:
    db_url = f"sqlite:///{tmp_path / 'external.db'}"
    store = Store.open(db_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(_config(
        tmp_path, apiserver, db_url, prom_url, refresh_in_serve=False))], env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and store.counts()["ticks"] < 3:
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert store.counts()["ticks"] >= 3
    assert store.counts()["forecasts"] == 0  # the leader ticked without refreshing any
    assert stderr.count('"event": "forecast.refresh_external"') == 1, stderr


def _cronjob() -> dict[str, Any]:
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    docs = yaml.safe_load_all((deploy / "forecast-cronjob.yaml").read_text())
    return next(d for d in docs if d["kind"] == "CronJob")


def test_the_forecast_cronjobs_shards_forecast_every_listed_model_once_from_prometheus(
        tmp_path: Path, prom_url: str) -> None:
    db_url = f"sqlite:///{tmp_path / 'job.db'}"
    store = Store.open(db_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    job = _cronjob()["spec"]["jobTemplate"]["spec"]
    container = job["template"]["spec"]["containers"][0]
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    config_map = next(d for d in yaml.safe_load_all((deploy / "config.yaml").read_text()))
    config = tmp_path / "headroom.yaml"  # the ConfigMap's file, where the pod mounts it
    config.write_text(config_map["data"]["headroom.yaml"])
    env = {**_env(), "HEADROOM_DB__URL": db_url, "HEADROOM_PROMETHEUS__URL": prom_url,
           "HEADROOM_FORECAST__HISTORY_S": "86400", "HEADROOM_FORECAST__METHOD": "level"}
    shards: list[set[str]] = []
    for index in range(job["completions"]):  # what the Job controller runs, pod by pod
        args = [str(config) if a == "/etc/headroom/headroom.yaml"
                else a.replace("$(SHARD_INDEX)", str(index)) for a in container["args"]]
        done = subprocess.run([*WARM_HEADROOM, *args, "--json"], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        shards.append(set(json.loads(done.stdout)["per_model"]))
    names = {m.name for m in DEMO_MODELS}
    assert set().union(*shards) == names and sum(map(len, shards)) == len(names)
    forecasts = store.latest_forecasts()
    assert set(forecasts) == names and store.counts()["forecasts"] == len(names)
    # a day of 12 rps that only Prometheus holds, each model read by its engine's counter (the
    # shipped config sets prometheus.by_engine): the vLLM models' counts twice that
    assert config_map["data"]["headroom.yaml"].count("by_engine: true") == 1
    for model in DEMO_MODELS:
        rps = MODEL_RPS * (VLLM_PER_REQUEST if model.engine is Engine.VLLM else 1.0)
        assert forecasts[model.name].p50[0] == pytest.approx(rps, rel=0.05), model.name


def test_forecast_run_on_kubernetes_without_a_prometheus_url_says_which_setting_on_one_line(
        tmp_path: Path, apiserver: ApiServer) -> None:
    db_url = f"sqlite:///{tmp_path / 'noprom.db'}"
    Store.open(db_url, migrate=True).upsert_models(DEMO_MODELS)
    done = subprocess.run([*WARM_HEADROOM, "forecast", "run", "--config", str(_config(
        tmp_path, apiserver, db_url, None))], env=_env(), capture_output=True, text=True,
        timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "set prometheus.url, or give --prometheus-url or --csv" in " ".join(
        done.stderr.split())
