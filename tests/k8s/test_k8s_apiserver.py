"""The Kubernetes API test server behaves like an API server for the official client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import kubernetes_validate
import pytest
from apiserver import KUBERNETES_VERSION, ApiServer, Invalid, validate_object
from k8s_builders import MODELS_NS, gpu_node, gpu_pod, model_deployment, nodepool, pdb
from kubernetes import client
from kubernetes.client.exceptions import ApiException

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def _data(response: Any) -> dict[str, Any]:
    """The JSON object of a raw response (``_preload_content=False``, which the client's
    annotations do not tell apart from its models)."""
    data: dict[str, Any] = json.loads(response.data)
    return data


def _http_status(response: Any) -> int:
    """The HTTP status of a raw response (``_preload_content=False``)."""
    return int(response.status)


def _as_sent(body: dict[str, Any]) -> Any:
    """A JSON body for the client's create and replace methods: they send a dict as it is, but
    their annotations name only their model classes (V1Node, V1Lease, ...)."""
    return body


def _status_of(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.body is not None
    return caught.value.status, json.loads(caught.value.body)


def test_reading_a_missing_object_is_404_with_a_status_body(kube: client.ApiClient) -> None:
    code, status = _status_of(lambda: client.CoreV1Api(kube).read_node("nope"))
    assert code == 404
    assert status["reason"] == "NotFound" and status["kind"] == "Status"


def test_create_then_list_with_label_and_field_selectors(apiserver: ApiServer,
                                                         kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    apiserver.seed(gpu_node("a1"))
    apiserver.seed(gpu_node("l1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    nodes = _data(core.list_node(label_selector="karpenter.sh/nodepool=l4",
                                 _preload_content=False))
    assert [n["metadata"]["name"] for n in nodes["items"]] == ["l1"]
    apiserver.seed(gpu_pod("p1", "a1"))
    apiserver.seed(gpu_pod("p2", "l1"))
    pods = _data(core.list_pod_for_all_namespaces(field_selector="spec.nodeName=a1",
                                                  _preload_content=False))
    assert [p["metadata"]["name"] for p in pods["items"]] == ["p1"]
    assert int(pods["metadata"]["resourceVersion"]) >= 4


def test_creating_an_existing_object_is_409_already_exists(apiserver: ApiServer,
                                                           kube: client.ApiClient) -> None:
    body = gpu_node("a1")
    client.CoreV1Api(kube).create_node(_as_sent(body), _preload_content=False)
    code, status = _status_of(lambda: client.CoreV1Api(kube).create_node(_as_sent(body)))
    assert (code, status["reason"]) == (409, "AlreadyExists")


def test_put_with_a_stale_resource_version_is_409_conflict(apiserver: ApiServer,
                                                           kube: client.ApiClient) -> None:
    coordination = client.CoordinationV1Api(kube)
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "l", "namespace": "headroom"},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
    created = _data(coordination.create_namespaced_lease("headroom", _as_sent(lease),
                                                         _preload_content=False))
    stale = created["metadata"]["resourceVersion"]
    updated = {**created, "spec": {**created["spec"], "holderIdentity": "b"}}
    coordination.replace_namespaced_lease("l", "headroom", _as_sent(updated),
                                          _preload_content=False)
    again = {**created, "spec": {**created["spec"], "holderIdentity": "c"},
             "metadata": {**created["metadata"], "resourceVersion": stale}}
    code, status = _status_of(lambda: coordination.replace_namespaced_lease(
        "l", "headroom", _as_sent(again)))
    assert (code, status["reason"]) == (409, "Conflict")
    assert apiserver.get("coordination.k8s.io/v1", "Lease", "l", "headroom")["spec"][
        "holderIdentity"] == "b"


def test_an_invalid_object_is_422_and_not_stored(apiserver: ApiServer,
                                                  kube: client.ApiClient) -> None:
    bad = model_deployment("m")
    bad["spec"]["replicas"] = "three"  # the typed create would refuse it client-side; apply won't
    code, status = _status_of(lambda: client.AppsV1Api(kube).patch_namespaced_deployment(
        "m", MODELS_NS, bad, field_manager="t", _content_type=APPLY))
    assert (code, status["reason"]) == (422, "Invalid")
    assert "spec.replicas" in status["message"]
    assert apiserver.find("apps/v1", "Deployment", "m", MODELS_NS) is None


def test_label_values_with_a_slash_are_rejected_like_the_real_server(
        kube: client.ApiClient) -> None:
    bad = model_deployment("m")
    bad["metadata"]["labels"]["headroom.dev/model"] = "language/m-large"
    code, status = _status_of(lambda: client.AppsV1Api(kube).create_namespaced_deployment(
        MODELS_NS, _as_sent(bad)))
    assert code == 422 and "label value" in status["message"]


def test_a_karpenter_nodepool_is_validated_against_its_schema(apiserver: ApiServer,
                                                               kube: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube)
    custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", nodepool("a100-80gb"),
                                        _preload_content=False)
    bad = nodepool("broken")
    del bad["spec"]["template"]["spec"]["nodeClassRef"]
    code, status = _status_of(lambda: custom.create_cluster_custom_object(
        "karpenter.sh", "v1", "nodepools", bad))
    assert code == 422 and "nodeClassRef" in status["message"]


def test_scale_subresource_reads_and_patches_replicas(apiserver: ApiServer,
                                                      kube: client.ApiClient) -> None:
    apps = client.AppsV1Api(kube)
    apiserver.seed(model_deployment("m", replicas=2))
    scale = _data(apps.read_namespaced_deployment_scale("m", MODELS_NS, _preload_content=False))
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2
    apps.patch_namespaced_deployment_scale("m", MODELS_NS, {"spec": {"replicas": 5}},
                                           _content_type=MERGE, _preload_content=False)
    assert apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)["spec"]["replicas"] == 5
    code, _ = _status_of(lambda: apps.patch_namespaced_deployment_scale(
        "m", MODELS_NS, {"spec": {"replicas": -1}}, _content_type=MERGE))
    assert code == 422


def test_status_is_kept_on_main_resource_writes(apiserver: ApiServer,
                                                kube: client.ApiClient) -> None:
    apiserver.seed(model_deployment("m", replicas=2, ready=2))
    client.AppsV1Api(kube).patch_namespaced_deployment(
        "m", MODELS_NS, {"status": {"readyReplicas": 0}, "metadata": {"labels": {"x": "y"}}},
        _content_type=MERGE, _preload_content=False)
    stored = apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)
    assert stored["status"]["readyReplicas"] == 2 and stored["metadata"]["labels"]["x"] == "y"


def test_server_side_apply_tracks_owners_removes_dropped_fields_and_reports_conflicts(
        apiserver: ApiServer, kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)

    def apply(manager: str, data: dict[str, str], force: bool | None = None) -> Any:
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": "gpu-operator"}, "data": data}
        return core.patch_namespaced_config_map("cm", "gpu-operator", body, field_manager=manager,
                                                force=force, _content_type=APPLY,
                                                _preload_content=False)

    first = apply("headroom", {"a": "1", "b": "2"})
    assert first.status == 201
    apply("headroom", {"a": "1"})
    stored = apiserver.get("v1", "ConfigMap", "cm", "gpu-operator")
    assert stored["data"] == {"a": "1"}
    assert stored["metadata"]["managedFields"][0]["manager"] == "headroom"
    code, status = _status_of(lambda: apply("helm", {"a": "changed"}))
    assert code == 409 and 'conflict with "headroom"' in status["message"]
    apply("helm", {"a": "changed"}, force=True)
    assert apiserver.get("v1", "ConfigMap", "cm", "gpu-operator")["data"]["a"] == "changed"


def test_a_no_op_apply_keeps_the_resource_version(apiserver: ApiServer,
                                                   kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "headroom"}, "data": {"a": "1"}}
    first = _data(core.patch_namespaced_config_map("cm", "headroom", body, field_manager="h",
                                                   _content_type=APPLY, _preload_content=False))
    second = _data(core.patch_namespaced_config_map("cm", "headroom", body, field_manager="h",
                                                    _content_type=APPLY, _preload_content=False))
    assert first["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]


def test_eviction_honours_the_disruption_budget_with_429(apiserver: ApiServer,
                                                        kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    apiserver.seed(gpu_pod("p1", "a1", labels={"app": "m"}))
    apiserver.seed(gpu_pod("p2", "a2", labels={"app": "m"}))
    apiserver.seed(pdb("m", {"app": "m"}, min_available=1))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "p1", "namespace": MODELS_NS}}
    first = core.create_namespaced_pod_eviction("p1", MODELS_NS, _as_sent(eviction),
                                                _preload_content=False)
    assert _http_status(first) == 201
    assert apiserver.find("v1", "Pod", "p1", MODELS_NS) is None
    second = {**eviction, "metadata": {"name": "p2", "namespace": MODELS_NS}}
    code, status = _status_of(lambda: core.create_namespaced_pod_eviction("p2", MODELS_NS,
                                                                         _as_sent(second)))
    assert (code, status["reason"]) == (429, "TooManyRequests")
    assert apiserver.find("v1", "Pod", "p2", MODELS_NS) is not None
    budget = apiserver.get("policy/v1", "PodDisruptionBudget", "m", MODELS_NS)
    assert budget["status"]["disruptionsAllowed"] == 0


def test_a_pod_under_two_budgets_cannot_be_evicted(apiserver: ApiServer,
                                                   kube: client.ApiClient) -> None:
    apiserver.seed(gpu_pod("p1", "a1", labels={"app": "m", "tier": "x"}))
    apiserver.seed(pdb("one", {"app": "m"}, max_unavailable=1))
    apiserver.seed(pdb("two", {"tier": "x"}, max_unavailable=1))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "p1", "namespace": MODELS_NS}}
    code, _ = _status_of(lambda: client.CoreV1Api(kube).create_namespaced_pod_eviction(
        "p1", MODELS_NS, _as_sent(eviction)))
    assert code == 500


def test_an_eviction_body_that_is_not_a_valid_policy_v1_eviction_is_refused(
        apiserver: ApiServer, kube: client.ApiClient) -> None:
    apiserver.seed(gpu_pod("p1", "a1", labels={"app": "m"}))
    core = client.CoreV1Api(kube)
    other = {"apiVersion": "policy/v1", "kind": "Eviction",
             "metadata": {"name": "p2", "namespace": MODELS_NS}}
    code, _ = _status_of(lambda: core.create_namespaced_pod_eviction("p1", MODELS_NS,
                                                                    _as_sent(other)))
    assert code == 400
    misspelt = {"apiVersion": "policy/v1", "kind": "Eviction", "deleteOption": {},
                "metadata": {"name": "p1", "namespace": MODELS_NS}}
    request = urllib.request.Request(  # the typed client refuses the field before sending it
        f"{apiserver.url}/api/v1/namespaces/{MODELS_NS}/pods/p1/eviction",
        data=json.dumps(misspelt).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 422
    assert apiserver.find("v1", "Pod", "p1", MODELS_NS) is not None


def test_injected_faults_answer_before_anything_happens(apiserver: ApiServer,
                                                        kube: client.ApiClient) -> None:
    apiserver.inject_fault("GET", "/api/v1/nodes", 503)
    code, _ = _status_of(lambda: client.CoreV1Api(kube).list_node())
    assert code == 503
    assert _http_status(client.CoreV1Api(kube).list_node(_preload_content=False)) == 200


@pytest.mark.parametrize("mutation", ["valid", "bad-type", "unknown-field"])
def test_server_validation_agrees_with_kubernetes_validate(mutation: str) -> None:
    obj = model_deployment("m")
    obj["metadata"]["name"] = "m"
    if mutation == "bad-type":
        obj["spec"]["replicas"] = "three"
    elif mutation == "unknown-field":
        obj["spec"]["replicaz"] = 3
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        expected_valid = True
    except kubernetes_validate.ValidationError:
        expected_valid = False
    try:
        validate_object(obj)
        server_valid = True
    except Invalid:
        server_valid = False
    assert server_valid == expected_valid == (mutation == "valid")


def test_strategic_merge_merges_containers_by_name_and_json_patch_tests_values(
        apiserver: ApiServer, kube: client.ApiClient) -> None:
    apps = client.AppsV1Api(kube)
    apiserver.seed(model_deployment("m"))
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "example.com/sidecar:1"}]}}}}
    apps.patch_namespaced_deployment("m", MODELS_NS, patch, _preload_content=False)
    containers = apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)["spec"]["template"][
        "spec"]["containers"]
    assert [c["name"] for c in containers] == ["triton", "sidecar"]
    guard = [{"op": "test", "path": "/spec/replicas", "value": 7},
             {"op": "replace", "path": "/spec/replicas", "value": 9}]
    code, _ = _status_of(lambda: apps.patch_namespaced_deployment(
        "m", MODELS_NS, guard, _content_type="application/json-patch+json"))
    assert code == 422
    guard[0]["value"] = 1
    apps.patch_namespaced_deployment("m", MODELS_NS, guard,
                                     _content_type="application/json-patch+json",
                                     _preload_content=False)
    assert apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)["spec"]["replicas"] == 9


def test_set_based_label_selectors(apiserver: ApiServer, kube: client.ApiClient) -> None:
    for name, pool, product in (("a", "a100-80gb", "NVIDIA-A100-SXM4-80GB"),
                                ("b", "l4", "NVIDIA-L4"), ("c", "h100", "NVIDIA-H100-80GB-HBM3")):
        apiserver.seed(gpu_node(name, nodepool=pool, product=product))
    core = client.CoreV1Api(kube)

    def names(selector: str) -> list[str]:
        listed = _data(core.list_node(label_selector=selector, _preload_content=False))
        return [n["metadata"]["name"] for n in listed["items"]]

    assert names("karpenter.sh/nodepool in (l4,h100)") == ["b", "c"]
    assert names("karpenter.sh/nodepool notin (l4),nvidia.com/mig.capable") == ["a", "c"]
    assert names("!nvidia.com/mig.capable") == ["b"]


def test_a_merge_patch_carrying_a_stale_resource_version_conflicts(
        apiserver: ApiServer, kube: client.ApiClient) -> None:
    apiserver.seed(gpu_node("a1"))
    core = client.CoreV1Api(kube)
    stale = apiserver.get("v1", "Node", "a1")["metadata"]["resourceVersion"]
    core.patch_node("a1", {"metadata": {"labels": {"x": "1"}}}, _content_type=MERGE,
                    _preload_content=False)
    code, _ = _status_of(lambda: core.patch_node(
        "a1", {"metadata": {"labels": {"x": "2"}, "resourceVersion": stale}},
        _content_type=MERGE))
    assert code == 409
