"""A model's scale-down removes the replicas on the emptiest nodes: its Deployment's pods get a
pod-deletion-cost first, which the ReplicaSet (played by FakeReplicaSetScaleDown, with
Kubernetes' ranking) weighs, so the node left empty can be consolidated without moving a
serving replica."""

from __future__ import annotations

from apiserver import ApiServer
from fake_controllers import DELETION_COST, FakeReplicaSetScaleDown
from k8s_builders import GPU_OPERATOR_NS, MODELS_NS, gpu_node, gpu_pod, model_deployment
from k8s_harness import leading, make_backend

from controlplane.adapters.k8s.names import WARM_POOL_LABEL
from controlplane.sim.clock import VirtualClock


def seed_two_nodes(server: ApiServer, *, crowded_cordoned: bool = False) -> None:
    """Model m (2 replicas): m-a alone on a100-2 (beside a device-plugin pod and a warm
    placeholder, which a drain leaves or Headroom removes), m-b on a100-1 beside two pods of
    another model. m-a is the older: the ReplicaSet alone would remove m-b."""
    server.seed(gpu_node("a100-1", gpus=1, unschedulable=crowded_cordoned))
    server.seed(gpu_node("a100-2", gpus=1))
    server.seed(model_deployment("m", replicas=2))
    server.seed(model_deployment("x", replicas=2))
    for name, node, app in (("m-a", "a100-2", "m"), ("m-b", "a100-1", "m"),
                            ("x-0", "a100-1", "x"), ("x-1", "a100-1", "x")):
        server.seed(gpu_pod(name, node, labels={"app": app}, owner_kind="ReplicaSet",
                            owner_name=f"{app}-rs"))
    server.seed(gpu_pod("nvidia-device-plugin-a100-2", "a100-2", namespace=GPU_OPERATOR_NS,
                        requests={}, owner_kind="DaemonSet"))
    server.seed(gpu_pod("headroom-warm-a100-80gb-0", "a100-2", namespace="headroom",
                        requests={}, labels={WARM_POOL_LABEL: "a100-80gb"},
                        owner_kind="ReplicaSet"))



def models_on(server: ApiServer, node: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in server.list("v1", "Pod", MODELS_NS)
                  if p["spec"]["nodeName"] == node)


def cost_of(server: ApiServer, pod: str) -> str | None:
    annotations = server.get("v1", "Pod", pod, MODELS_NS)["metadata"].get("annotations") or {}
    return annotations.get(DELETION_COST)


def test_left_to_itself_the_replicaset_removes_the_newer_replica_beside_other_pods(
        apiserver: ApiServer) -> None:
    seed_two_nodes(apiserver)
    apiserver.update("apps/v1", "Deployment", "m", {"spec": {"replicas": 1}}, MODELS_NS)
    replicaset = FakeReplicaSetScaleDown(apiserver, "m")
    replicaset.react()
    assert replicaset.deleted == ["m-b"]  # a100-2 keeps m-a: no node is left empty


def test_a_scale_down_removes_the_replica_alone_on_its_node_so_the_node_empties(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_two_nodes(apiserver)
    outcome = leading(apiserver, clock).replicas.set_replicas("m", 1)
    assert (outcome.ok, outcome.steering) == (True, "steered")
    assert outcome.message == (
        "model m target 1 replicas (Deployment models/m); controller.kubernetes.io/"
        "pod-deletion-cost on 2 pods: replicas on the emptiest nodes go first")
    assert (cost_of(apiserver, "m-a"), cost_of(apiserver, "m-b")) == ("2", "2002")
    assert cost_of(apiserver, "x-0") is None  # another model's pods are left as they are
    replicaset = FakeReplicaSetScaleDown(apiserver, "m")
    replicaset.react()
    assert replicaset.deleted == ["m-a"]
    assert models_on(apiserver, "a100-2") == []  # nothing left there that a drain would move
    assert models_on(apiserver, "a100-1") == ["m-b", "x-0", "x-1"]


def test_a_replica_on_a_cordoned_node_goes_first_even_beside_other_pods(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_two_nodes(apiserver, crowded_cordoned=True)
    assert leading(apiserver, clock).replicas.set_replicas("m", 1).ok
    assert cost_of(apiserver, "m-b") == "0"
    replicaset = FakeReplicaSetScaleDown(apiserver, "m")
    replicaset.react()
    assert replicaset.deleted == ["m-b"]


def test_a_scale_down_ranked_already_writes_no_annotation_again(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_two_nodes(apiserver)
    backend = leading(apiserver, clock)
    assert backend.replicas.set_replicas("m", 1).ok
    apiserver.update("apps/v1", "Deployment", "m", {"spec": {"replicas": 2}}, MODELS_NS)
    before = len([r for r in apiserver.writes() if "/pods/" in r.path])
    again = backend.replicas.set_replicas("m", 1)
    assert (again.ok, again.steering) == (True, "ranked") and again.message.endswith(
        "controller.kubernetes.io/pod-deletion-cost already ranks the emptiest nodes first")
    assert len([r for r in apiserver.writes() if "/pods/" in r.path]) == before


def test_a_scale_up_and_a_statefulset_scale_down_annotate_no_pod(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_two_nodes(apiserver)
    apiserver.seed(model_deployment("llm", replicas=2, kind="StatefulSet", engine="vllm"))
    backend = leading(apiserver, clock)
    up = backend.replicas.set_replicas("m", 3)
    down = backend.replicas.set_replicas("llm", 1)
    assert up.ok and down.ok
    assert "pod-deletion-cost" not in up.message + down.message
    assert up.steering == down.steering == ""  # no Deployment scale-down, nothing counted
    assert [r for r in apiserver.writes() if "/pods/" in r.path] == []


def test_pods_that_cannot_be_annotated_leave_the_scale_down_to_go_ahead_unsteered(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_two_nodes(apiserver)
    apiserver.inject_fault("PATCH", "/pods/", 403)  # an RBAC without patch on pods
    outcome = leading(apiserver, clock).replicas.set_replicas("m", 1)
    assert (outcome.ok, outcome.steering) == (True, "unsteered")
    assert outcome.message.startswith(
        "model m target 1 replicas (Deployment models/m); not steered to the emptiest nodes "
        "(controller.kubernetes.io/pod-deletion-cost: ")
    assert apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)["spec"]["replicas"] == 1


def test_a_dry_run_records_the_annotations_it_would_write_and_writes_none(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_two_nodes(apiserver)
    backend = make_backend(apiserver, clock, dry_run=True)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert backend.replicas.set_replicas("m", 1).ok
    planned = [(w.kind, w.name, w.body) for w in backend.planned_writes() if w.kind == "Pod"]
    assert planned == [
        ("Pod", "m-a", {"metadata": {"annotations": {DELETION_COST: "2"}}}),
        ("Pod", "m-b", {"metadata": {"annotations": {DELETION_COST: "2002"}}})]
    assert cost_of(apiserver, "m-a") is None
    assert apiserver.get("apps/v1", "Deployment", "m", MODELS_NS)["spec"]["replicas"] == 2
