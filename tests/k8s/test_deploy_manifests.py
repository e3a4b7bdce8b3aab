"""deploy/: every manifest is schema-valid (kubernetes-validate, strict); the settings file loads;
Services reach the Deployment's ports; and RBAC grants exactly what the adapters use — replaying
the full plan against the API test server, every request is allowed and every rule is needed."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
import pytest
import yaml
from apiserver import KUBERNETES_VERSION, ApiServer, RequestRecord
from apiserver.resources import parse_path
from fake_controllers import FakeMigManager
from full_plan_scenario import run_full_plan, seed_fleet
from gpu_operator_configs import device_plugin_config_problems, mig_parted_problems
from k8s_harness import make_backend
from pod_security import restricted_problems

from controlplane.adapters.k8s.manifests import mig_parted_configs
from controlplane.adapters.k8s.names import placeholder_name
from controlplane.adapters.keda_query import scaler_query
from controlplane.cli.forecast_run import EXIT_STATE_UNSAVED
from controlplane.domain.mig_layout import layout_from_entries, layout_problems
from controlplane.settings import load_settings
from controlplane.sim.clock import VirtualClock

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    # the Grafana dashboard's ConfigMap too; not the Prometheus Operator's kinds (no schema)
    for path in sorted([*DEPLOY.glob("*.yaml"), *DEPLOY.glob("grafana/*.yaml")]):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def find(kind: str, name: str) -> dict[str, Any]:
    return next(d for d in documents() if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.mark.parametrize("doc", documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_manifest_is_schema_valid(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_settings_file_loads_as_a_kubernetes_backend(tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(find("ConfigMap", "headroom")["data"]["headroom.yaml"])
    settings = load_settings(config)
    assert settings.backend == "kubernetes"
    assert settings.placement.listen == "0.0.0.0:50051"
    assert settings.placement.metrics_listen == "0.0.0.0:9464"
    assert settings.k8s.renew_deadline_s < settings.k8s.lease_duration_s
    assert {p.name for p in settings.pools} == {"a100-80gb", "l4"}


def test_the_forecasters_fitted_state_is_kept_on_a_writable_volume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADROOM_FORECAST__STATE_DIR")  # the tests' own (tests/conftest.py)
    config = tmp_path / "headroom.yaml"
    config.write_text(find("ConfigMap", "headroom")["data"]["headroom.yaml"])
    state_dir = load_settings(config).forecast.state_dir
    assert state_dir is not None and state_dir.is_absolute()
    pod = find("Deployment", "headroom")["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "headroom")
    assert container["securityContext"]["readOnlyRootFilesystem"]
    writable = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    assert any(m["name"] in writable and state_dir.is_relative_to(m["mountPath"])
               for m in container["volumeMounts"])


def test_the_forecast_cronjob_runs_one_shard_per_index_on_shared_writable_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cron = find("CronJob", "headroom-forecast")
    job = cron["spec"]["jobTemplate"]["spec"]
    assert job["completionMode"] == "Indexed" and job["parallelism"] == job["completions"]
    pod = job["template"]["spec"]
    container = pod["containers"][0]
    args = container["args"]
    assert args[:2] == ["forecast", "run"]
    assert args[args.index("--shard") + 1] == f"$(SHARD_INDEX)/{job['completions']}"
    # the fits run in worker processes: one the OOM killer ends costs its own model only
    assert int(args[args.index("--workers") + 1]) >= 2
    env = {e["name"]: e for e in container["env"]}
    assert env["SHARD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']")
    serve = find("Deployment", "headroom")["spec"]["template"]["spec"]["containers"][0]
    assert env["HEADROOM_DB__URL"] in serve["env"]  # the same store as serve
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    config_volume = next(v for v in pod["volumes"] if "configMap" in v)
    assert config_volume["configMap"]["name"] == "headroom"
    assert args[args.index("--config") + 1].startswith(mounts[config_volume["name"]] + "/")
    state_dir = PurePosixPath(env["HEADROOM_FORECAST__STATE_DIR"]["value"])
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]
              if "persistentVolumeClaim" in v}
    on = [name for name, path in mounts.items() if state_dir.is_relative_to(path)]
    assert len(on) == 1 and on[0] in claims  # every shard's pod sees every fitted state
    claim = find("PersistentVolumeClaim", claims[on[0]])
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert container["securityContext"]["readOnlyRootFilesystem"]
    monkeypatch.delenv("HEADROOM_FORECAST__STATE_DIR")
    config = tmp_path / "headroom.yaml"
    config.write_text(find("ConfigMap", "headroom")["data"]["headroom.yaml"])
    interval_s = load_settings(config).forecast.interval_s
    assert cron["spec"]["schedule"] == f"*/{int(interval_s // 60)} * * * *"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert job["activeDeadlineSeconds"] < interval_s  # a run ends before the next is due


def _failed_pod_action(job: dict[str, Any], exit_code: int, container: str = "forecast",
                       conditions: frozenset[str] = frozenset()) -> str:
    """What the Job controller does with a failed pod of ``job`` whose ``container`` exited
    with ``exit_code`` and which has the pod ``conditions`` (type, status True): the action
    of the first ``podFailurePolicy`` rule that matches, else Count (the pod counts against
    the backoff limit, per index with ``backoffLimitPerIndex``)."""
    for rule in job.get("podFailurePolicy", {}).get("rules", []):
        codes = rule.get("onExitCodes")
        if codes is not None:
            if codes.get("containerName", container) == container and exit_code != 0 and (
                    (exit_code in codes["values"]) == (codes["operator"] == "In")):
                return str(rule["action"])
        elif any(p["type"] in conditions and p["status"] == "True"
                 for p in rule["onPodConditions"]):
            return str(rule["action"])
    return "Count"


def test_the_forecast_cronjob_fails_a_shard_at_once_on_the_exit_codes_a_retry_cannot_change(
        ) -> None:
    job = find("CronJob", "headroom-forecast")["spec"]["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    rules = job.get("podFailurePolicy", {}).get("rules", [])
    for rule in rules:  # what the API server's validation demands
        codes = rule.get("onExitCodes")
        if codes is not None:
            assert codes["containerName"] in {c["name"] for c in pod["containers"]}
            assert codes["values"] == sorted(set(codes["values"])) and 0 not in codes["values"]
    assert pod["restartPolicy"] == "Never"  # a podFailurePolicy needs it
    assert job["backoffLimitPerIndex"] == 1  # FailIndex needs it; Count: one retry per shard
    # 1: some model got no forecast (the others are stored); 2: bad config; 3: state not saved
    for code in (1, 2, EXIT_STATE_UNSAVED):
        assert _failed_pod_action(job, code) == "FailIndex", code
    for code in (137, 139, 143):  # OOM-killed, a crash, SIGTERM: retried
        assert _failed_pod_action(job, code) == "Count", code
    for code in (1, 137):  # evicted or preempted: replaced, its retry kept
        assert _failed_pod_action(job, code, conditions=frozenset({"DisruptionTarget"})) == (
            "Ignore")


def _pod_of(kind: str, name: str) -> dict[str, Any]:
    spec = find(kind, name)["spec"]
    template = spec["jobTemplate"]["spec"]["template"] if kind == "CronJob" else spec["template"]
    return dict(template["spec"])


@pytest.mark.parametrize(("kind", "name"), [("Deployment", "headroom"),
                                            ("Deployment", "headroom-dashboard"),
                                            ("CronJob", "headroom-forecast")])
def test_headroom_s_own_pods_meet_the_restricted_pod_security_level_of_their_namespace(
        kind: str, name: str) -> None:
    namespace = find("Namespace", "headroom")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert find(kind, name)["metadata"]["namespace"] == "headroom"
    assert restricted_problems(_pod_of(kind, name)) == []


def test_the_placement_api_is_tls_with_a_token_from_mounted_secrets_and_probed_in_plaintext(
        tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(find("ConfigMap", "headroom")["data"]["headroom.yaml"])
    placement = load_settings(config).placement
    pod = find("Deployment", "headroom")["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "headroom")
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    mounted = {PurePosixPath(m["mountPath"]): secrets[m["name"]]
               for m in container["volumeMounts"] if m["name"] in secrets}
    files = {"tls.crt": placement.tls_cert_file, "tls.key": placement.tls_key_file,
             "token": placement.token_file}
    for key, path in files.items():  # each file is a key of a mounted Secret
        assert path is not None and PurePosixPath(path).name == key
        assert PurePosixPath(path).parent in mounted, path
    assert set(mounted.values()) == {"headroom-grpc-tls", "headroom-grpc-token"}
    assert placement.health_listen is not None
    health = int(placement.health_listen.rsplit(":", 1)[1])
    for probe in ("readinessProbe", "livenessProbe"):  # kubelet's gRPC probe: no TLS, no token
        assert container[probe]["grpc"]["port"] == health
    assert "appProtocol" not in find("Service", "headroom-grpc")["spec"]["ports"][0]  # not h2c


def test_every_client_keda_included_presents_a_certificate_of_the_mounted_ca(
        tmp_path: Path) -> None:
    # KEDA's scaler takes no token: without a client CA anyone reaching the port read every
    # tenant's forecast demand through it
    config = tmp_path / "headroom.yaml"
    config.write_text(find("ConfigMap", "headroom")["data"]["headroom.yaml"])
    settings = load_settings(config)
    placement = settings.placement
    assert placement.tls_client_ca_file is not None
    assert placement.tls_cert_file is not None
    assert PurePosixPath(placement.tls_client_ca_file) == (
        PurePosixPath(placement.tls_cert_file).parent / "ca.crt")  # the Secret headroom-grpc-tls
    assert placement.watch_caller_share == settings.autoscaling.keda_caller_share == 0.25


def test_the_keda_example_authenticates_by_mutual_tls_to_the_grpc_service() -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all(
        (DEPLOY / "examples" / "keda-scaledobject.yaml").read_text())}
    certificate, auth, scaled = (docs["Certificate"], docs["TriggerAuthentication"],
                                 docs["ScaledObject"])
    assert "client auth" in certificate["spec"]["usages"]
    refs = {r["parameter"]: (r["name"], r["key"]) for r in auth["spec"]["secretTargetRef"]}
    secret = certificate["spec"]["secretName"]
    assert refs == {"caCert": (secret, "ca.crt"), "tlsClientCert": (secret, "tls.crt"),
                    "tlsClientKey": (secret, "tls.key")}
    assert (certificate["metadata"]["namespace"] == auth["metadata"]["namespace"]
            == scaled["metadata"]["namespace"])
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["type"] == "external-push"
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    service = find("Service", "headroom-grpc")
    port = service["spec"]["ports"][0]["port"]
    assert trigger["metadata"]["scalerAddress"] == (
        f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc:{port}")
    query = scaler_query(trigger["metadata"], {"llama-3-8b-chat": 20.0}, 600.0)
    assert query.model == "llama-3-8b-chat"  # KEDA's own keys (enableTLS) are let through


def _selects(selector: dict[str, str], deployment: dict[str, Any]) -> bool:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return selector.items() <= labels.items()


def test_two_replicas_and_services_that_reach_their_named_ports() -> None:
    deployment = find("Deployment", "headroom")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]
    ports = {p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c["ports"]}
    assert ports == {"grpc": 50051, "grpc-health": 50052, "metrics": 9464}
    scrape = pod["metadata"]["annotations"]
    assert scrape["prometheus.io/scrape"] == "true" and scrape["prometheus.io/port"] == "9464"
    assert pod["spec"]["serviceAccountName"] == "headroom"
    dashboard = find("Deployment", "headroom-dashboard")
    dashboard_ports = {p["name"]: p["containerPort"] for c in
                       dashboard["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
    assert dashboard_ports == {"dashboard": 8501}
    for name, port, target in (("headroom-grpc", "grpc", deployment),
                               ("headroom-dashboard", "dashboard", dashboard)):
        service = find("Service", name)
        assert _selects(service["spec"]["selector"], target)
        assert service["spec"]["ports"][0]["targetPort"] == port


def test_a_failing_dashboard_takes_no_placement_endpoints_away() -> None:
    serve, dashboard = find("Deployment", "headroom"), find("Deployment", "headroom-dashboard")
    containers = [c["name"] for c in serve["spec"]["template"]["spec"]["containers"]]
    assert containers == ["headroom"]  # no dashboard container sharing the pod's readiness
    assert not _selects(find("Service", "headroom-grpc")["spec"]["selector"], dashboard)
    assert not _selects(find("Service", "headroom-dashboard")["spec"]["selector"], serve)
    assert not _selects(serve["spec"]["selector"]["matchLabels"], dashboard)
    assert not _selects(find("PodDisruptionBudget", "headroom")["spec"]["selector"][
        "matchLabels"], dashboard)
    container = dashboard["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:3] == ["dashboard", "--config", "/etc/headroom/headroom.yaml"]
    assert container["readinessProbe"]["httpGet"]["port"] == 8501
    assert container["resources"]["limits"]["memory"] == "1Gi"


def test_the_dashboard_runs_as_a_service_account_with_no_rbac_and_no_token() -> None:
    pod = find("Deployment", "headroom-dashboard")["spec"]["template"]["spec"]
    account = find("ServiceAccount", pod["serviceAccountName"])
    assert account["metadata"]["name"] != "headroom"
    assert account["automountServiceAccountToken"] is False
    assert pod["automountServiceAccountToken"] is False
    bound = [s["name"] for d in documents() if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
             for s in d["subjects"]]
    assert account["metadata"]["name"] not in bound
    env = {e["name"] for e in pod["containers"][0]["env"]}
    assert env == {"HEADROOM_DB__URL"}  # the store is all it reads


def test_a_pod_monitor_scrapes_the_control_planes_metrics_port_under_the_prometheus_operator(
        ) -> None:
    monitor = yaml.safe_load((DEPLOY / "prometheus" / "headroom-podmonitor.yaml").read_text())
    rule = yaml.safe_load((DEPLOY / "prometheus" / "headroom-prometheusrule.yaml").read_text())
    # no schema for CRDs in kubernetes-validate: checked by hand, as the PrometheusRule is
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    assert monitor["metadata"]["namespace"] == "headroom"
    assert monitor["metadata"]["labels"]["release"] == rule["metadata"]["labels"]["release"]
    serve = find("Deployment", "headroom")
    assert _selects(monitor["spec"]["selector"]["matchLabels"], serve)
    assert not _selects(monitor["spec"]["selector"]["matchLabels"],
                        find("Deployment", "headroom-dashboard"))
    ports = {p["name"]: p["containerPort"] for c in serve["spec"]["template"]["spec"][
        "containers"] for p in c["ports"]}
    endpoints = monitor["spec"]["podMetricsEndpoints"]
    assert [e["port"] for e in endpoints] == ["metrics"] and ports["metrics"] == 9464
    assert serve["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "9464"


def test_the_gpu_operator_configmaps_parse() -> None:
    configs = mig_parted_configs(find("ConfigMap", "headroom-mig-parted-config")["data"][
        "config.yaml"])
    assert {"all-disabled", "all-1g.10gb", "all-balanced"} <= set(configs)
    plugin = yaml.safe_load(find("ConfigMap", "headroom-device-plugin-config")["data"]["default"])
    assert plugin["flags"]["migStrategy"] == "mixed"
    for name, text in find("ConfigMap", "headroom-device-plugin-config")["data"].items():
        assert device_plugin_config_problems(text) == [], name
    text = find("ConfigMap", "headroom-mig-parted-config")["data"]["config.yaml"]
    for product in ("A100-40GB", "A100-80GB", "H100-80GB"):
        assert mig_parted_problems(text, product) == [], product


@pytest.mark.parametrize("product", ["A100-40GB", "A100-80GB", "H100-80GB"])
def test_every_shipped_mig_config_is_a_valid_geometry_on_each_gpu_it_applies_to(
        product: str) -> None:
    # REFERENCE.md §1.7 / §11.3: profile names mean different things per GPU (1g.10gb is the
    # double-memory 1g, at most 4, on A100-40GB), so a config meant for several GPU families
    # tells them apart with device-filter entries, as mig-parted's defaults do.
    configs = mig_parted_configs(find("ConfigMap", "headroom-mig-parted-config")["data"][
        "config.yaml"])
    for name in ("all-1g.10gb", "all-balanced"):
        layout = layout_from_entries(product, configs[name])
        assert layout.is_mig_enabled(), f"{name} has no entry for {product}"
        assert layout_problems(layout) == [], f"{name} on {product}"


@dataclass(frozen=True)
class Rule:
    namespace: str | None  # None: cluster-wide (ClusterRoleBinding)
    groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    names: frozenset[str]

    def allows(self, verb: str, group: str, resource: str, namespace: str, name: str) -> bool:
        return (self.namespace in (None, namespace) and group in self.groups
                and resource in self.resources and verb in self.verbs
                and (not self.names or name in self.names))


def granted_rules() -> list[Rule]:
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
             for d in documents() if d["kind"] in ("ClusterRole", "Role")}
    rules = []
    for binding in (d for d in documents() if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "headroom",
                                        "namespace": "headroom"}]
        namespace = binding["metadata"].get("namespace")
        ref = binding["roleRef"]
        role = roles[(ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role["rules"]:
            rules.append(Rule(namespace, frozenset(rule["apiGroups"]), frozenset(rule["resources"]),
                              frozenset(rule["verbs"]), frozenset(rule.get("resourceNames", []))))
    return rules


def permissions(request: RequestRecord) -> list[tuple[str, str, str, str, str]]:
    """RBAC attributes (verb, group, resource, namespace, name) the API server checks."""
    route = parse_path(request.path)
    res = route.resource
    resource = f"{res.plural}/{route.subresource}" if route.subresource else res.plural
    verb = {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(request.method, "")
    if request.method == "GET":
        verb = "get" if route.name else "list"
    if request.method == "POST":
        verb = "create"
    name = route.name if (route.name and request.method != "POST") or route.subresource else ""
    found = [(verb, res.group, resource, route.namespace, name)]
    if request.content_type == "application/apply-patch+yaml" and request.status == 201:
        found.append(("create", res.group, resource, route.namespace, route.name))
    return found


def test_rbac_grants_exactly_what_the_adapters_use(apiserver: ApiServer,
                                                   clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    start = len(apiserver.requests)
    backend = make_backend(apiserver, clock)
    outcomes = run_full_plan(apiserver, clock, backend, FakeMigManager(apiserver, clock=clock))
    assert all(o.ok for o in outcomes)
    # a scale-down annotates the replicas' pod-deletion-cost first
    assert backend.replicas.set_replicas("m", 2).ok
    backend.guard_loading()  # lists the models' workloads and pods
    backend.elector.release()
    used = [p for r in apiserver.requests[start:] if r.field_manager != "test-controller"
            for p in permissions(r)]
    rules = granted_rules()
    denied = sorted({p for p in used if not any(rule.allows(*p) for rule in rules)})
    assert denied == []
    unused = [(sorted(rule.resources), verb) for rule in rules for verb in sorted(rule.verbs)
              if not any(rule.allows(*p) for p in used if p[0] == verb)]
    assert unused == []


def test_rbac_writes_only_the_placeholder_deployments_of_the_configured_pools(
        tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(find("ConfigMap", "headroom")["data"]["headroom.yaml"])
    pools = load_settings(config).pools
    deployment_writes = [rule for rule in granted_rules() if "deployments" in rule.resources
                         and rule.verbs & {"create", "patch", "update"}]
    assert deployment_writes != []
    assert {rule.names for rule in deployment_writes} == {
        frozenset(placeholder_name(pool.name) for pool in pools)}
    for own in ("headroom", "headroom-dashboard"):  # it cannot rewrite its own Deployments
        assert find("Deployment", own)["metadata"]["namespace"] == "headroom"
        for verb in ("create", "patch", "update"):
            assert not any(rule.allows(verb, "apps", "deployments", "headroom", own)
                           for rule in granted_rules())


ROOT = DEPLOY.parent


def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of the repository's Dockerfile, continuations joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines
            if line and not line.startswith("#")]


def _headroom_containers() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, container) of every container of deploy/ that runs Headroom's image."""
    found = []
    for doc in documents():
        if doc["kind"] not in ("Deployment", "CronJob"):
            continue
        pod = _pod_of(doc["kind"], doc["metadata"]["name"])
        found += [(pod, c) for c in pod["containers"]
                  if c["image"].startswith("ghcr.io/headroom-dev/headroom:")]
    return found


def test_the_dockerfile_builds_the_image_the_manifests_run_as_they_run_it() -> None:
    # No Docker engine here: what can be checked without building it, statically.
    instructions = _dockerfile()
    assert instructions[0] == ("FROM", "python:3.11-slim")
    containers = _headroom_containers()
    assert len(containers) >= 3  # serve, dashboard, forecast run
    images = {c["image"] for _, c in containers}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert images == {f"ghcr.io/headroom-dev/headroom:{version}"}  # one tag, the project's
    users = [args for op, args in instructions if op == "USER"]
    uid = int(users[-1].split(":")[0])
    for pod, container in containers:
        run_as = container.get("securityContext", {}).get(
            "runAsUser", pod["securityContext"]["runAsUser"])
        assert run_as == uid, container["name"]
    entrypoints = [json.loads(args) for op, args in instructions if op == "ENTRYPOINT"]
    assert entrypoints[-1] == ["headroom"]
    for _, container in containers:  # the manifests give the subcommand as args only
        assert "command" not in container and container["args"][0] in {
            "serve", "dashboard", "forecast"}, container["name"]
    assert ("RUN", "pip install . && rm -rf /src") in instructions


def test_the_docker_build_context_keeps_everything_the_dockerfile_copies() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    copied = [args.split()[:-1] for op, args in _dockerfile() if op == "COPY"]
    sources = [source for group in copied for source in group]
    assert {"pyproject.toml", "controlplane", "dashboard"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists() and source not in ignored, source
