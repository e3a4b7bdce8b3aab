"""K8sClusterReader: Kubernetes objects -> the same ObservedState the simulator produces."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from http.server import BaseHTTPRequestHandler

import pytest
import yaml
from apiserver import ApiServer
from k8s_builders import (
    GPU_OPERATOR_NS,
    gpu_node,
    gpu_pod,
    model_deployment,
    nodepool,
    pdb,
)
from k8s_harness import START_AT, FixedLoads, make_backend
from kubernetes import client

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.inventory import (
    free_gpu_resources,
    normalize_product,
    offered_mig,
    parse_pod,
)
from controlplane.adapters.k8s.manifests import config_map, device_plugin_entry
from controlplane.adapters.placement import inventory_request
from controlplane.domain.errors import PermanentError, TransientError
from controlplane.domain.models import SharingMode
from controlplane.domain.observed import ModelLoad
from controlplane.domain.sharing_config import SharingLayout
from controlplane.sim.clock import VirtualClock
from controlplane.store.codec import observed_to_json
from tests.httpstub import serve


def seed_fleet(server: ApiServer) -> None:
    server.seed(nodepool("a100-80gb", limits={"nodes": "3"}))
    server.seed(nodepool("l4", gpu_name="l4"))
    server.seed(gpu_node("a100-1", mig_config="all-1g.10gb", gpus=1,
                         allocatable={"nvidia.com/mig-1g.10gb": "7"}))
    server.seed(gpu_node("a100-2", ready=False))
    server.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4", sharing="mps"))
    server.seed(gpu_node("cpu-1", product="", gpus=0, nodepool="cpu", allocatable={}))
    server.seed(model_deployment("language/m-large", replicas=3, ready=2))
    server.seed(model_deployment("vision/resnet", replicas=2, ready=2, kind="StatefulSet",
                                 engine="vllm"))
    server.seed(gpu_pod("m-large-0", "a100-1", labels={"app": "language.m-large"}))


def test_snapshot_maps_nodes_pools_and_models(apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    observed = make_backend(apiserver, clock).reader.snapshot()
    assert observed.synced and observed.synced_at == START_AT
    a100 = observed.pool("a100-80gb")
    assert a100 is not None
    assert (a100.product, a100.nodes_ready, a100.nodes_pending, a100.target_nodes) == (
        "A100-80GB", 1, 1, 3)  # target from the NodePool's node limit
    l4 = observed.pool("l4")
    assert l4 is not None and (l4.nodes_ready, l4.target_nodes) == (1, 1)
    assert sorted(n.name for n in observed.nodes) == ["a100-1", "a100-2", "l4-1"]
    large = observed.model("language/m-large")
    assert large is not None
    assert (large.replicas_target, large.replicas_ready, large.replicas_pending) == (3, 2, 1)
    resnet = observed.model("vision/resnet")
    assert resnet is not None and resnet.replicas_target == 2


def test_gpus_carry_mig_layout_and_sharing_mode(apiserver: ApiServer,
                                                clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    observed = make_backend(apiserver, clock).reader.snapshot()
    nodes = {n.name: n for n in observed.nodes}
    mig_gpu = nodes["a100-1"].gpus[0]
    assert mig_gpu.sharing == "mig" and mig_gpu.mig_layout == ("1g.10gb",) * 7
    assert mig_gpu.product == "A100-80GB" and mig_gpu.memory_mib == 80 * 1024
    assert {g.sharing for g in nodes["l4-1"].gpus} == {"mps"}
    assert len(nodes["a100-2"].gpus) == 8 and not nodes["a100-2"].ready
    assert ("nvidia.com/mig.config", "all-1g.10gb") in nodes["a100-1"].labels


def test_headroom_mig_configs_are_read_from_the_mig_parted_configmap(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    document = {"version": "v1", "mig-configs": {"headroom-custom": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [1], "mig-enabled": False}]}}
    apiserver.seed({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "headroom-mig-parted-config",
                                 "namespace": GPU_OPERATOR_NS},
                    "data": {"config.yaml": yaml.safe_dump(document)}})
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("a100-1", gpus=2, mig_config="headroom-custom"))
    node = make_backend(apiserver, clock).reader.snapshot().nodes[0]
    assert node.gpus[0].mig_layout == ("3g.40gb", "3g.40gb") and node.gpus[0].sharing == "mig"
    assert node.gpus[1].mig_layout == () and node.gpus[1].sharing == "exclusive"


def test_budgets_that_allow_no_disruption_and_pending_mig_changes_are_noted(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    apiserver.seed(pdb("m-large", {"app": "language.m-large"}, min_available=1))
    apiserver.seed(gpu_node("a100-3", mig_config="all-balanced", mig_state="pending"))
    notes = make_backend(apiserver, clock).reader.snapshot().notes
    assert "pdb models/m-large allows no disruption now" in notes
    assert "node a100-3: mig.config=all-balanced state=pending" in notes
    assert "no load source: demand_rps and capacity_rps are 0" in notes


def test_without_karpenter_targets_fall_back_to_node_counts(apiserver: ApiServer,
                                                             clock: VirtualClock) -> None:
    apiserver.seed(gpu_node("a100-1"))
    apiserver.inject_fault("GET", "/apis/karpenter.sh/v1/nodepools", 404)
    observed = make_backend(apiserver, clock).reader.snapshot()
    pool = observed.pool("a100-80gb")
    assert pool is not None and pool.target_nodes == 1
    assert any("NodePool API not found" in note for note in observed.notes)


def test_an_unreachable_api_server_is_a_transient_error(apiserver: ApiServer,
                                                        clock: VirtualClock) -> None:
    backend = make_backend(apiserver, clock, request_timeout_s=2)
    apiserver.stop()
    with pytest.raises(TransientError, match="unreachable"):
        backend.reader.snapshot()


def test_a_server_error_is_a_transient_error(apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.inject_fault("GET", "/api/v1/nodes", 503)
    with pytest.raises(TransientError, match="HTTP 503"):
        make_backend(apiserver, clock).reader.snapshot()


def test_a_pool_node_that_lost_its_gpu_feature_discovery_labels_is_left_out_with_a_note(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    unlabelled = gpu_node("a100-3")  # e.g. while the GPU Operator is upgraded
    labels = unlabelled["metadata"]["labels"]
    unlabelled["metadata"]["labels"] = {k: v for k, v in labels.items()
                                        if not k.startswith("nvidia.com/")}
    apiserver.seed(unlabelled)
    observed = make_backend(apiserver, clock).reader.snapshot()
    assert "a100-3" not in {n.name for n in observed.nodes}
    assert ("node a100-3: in pool a100-80gb but has no nvidia.com/gpu.product label (is GPU "
            "Feature Discovery running on it?); left out of the fleet") in observed.notes
    assert not any("cpu-1" in note for note in observed.notes)  # not in a configured pool


class _LoginPage(BaseHTTPRequestHandler):
    """A web server that is not the Kubernetes API: 200 and HTML for every path."""

    def do_GET(self) -> None:
        body = b"<html><body>Sign in</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_server_answering_html_instead_of_the_api_is_an_api_error_naming_it(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    login = serve(_LoginPage)
    try:
        url = f"http://127.0.0.1:{login.server_port}"
        backend = make_backend(apiserver, clock, api=KubeApi(
            client.ApiClient(client.Configuration(host=url)), "headroom", timeout_s=5))
        with pytest.raises(TransientError) as raised:
            backend.reader.snapshot()
    finally:
        login.shutdown()
    assert str(raised.value) == (f"unexpected API response from {url}: not JSON "
                                 "(Content-Type text/html)")


def test_free_gpu_resources_subtract_pod_requests(apiserver: ApiServer,
                                                  clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    inventory = make_backend(apiserver, clock).reader.inventory()
    node = inventory.node("a100-1")
    assert node is not None
    assert free_gpu_resources(node, inventory.pods_on("a100-1")) == {"nvidia.com/mig-1g.10gb": 6}


@pytest.mark.parametrize(("label", "memory_mib", "product"), [
    ("NVIDIA-A100-SXM4-80GB", 0, "A100-80GB"),
    ("NVIDIA-A100-SXM4-40GB", 0, "A100-40GB"),
    ("NVIDIA-A100-80GB-PCIe", 81920, "A100-80GB"),
    ("NVIDIA-H100-80GB-HBM3", 0, "H100-80GB"),
    ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", 0, "A100-80GB"),
    ("Tesla-T4-SHARED", 0, "T4"),
    ("NVIDIA-L4", 0, "L4"),
    ("Mystery-GPU", 0, "Mystery-GPU"),
])
def test_gfd_product_labels_map_onto_catalog_products(label: str, memory_mib: int,
                                                      product: str) -> None:
    assert normalize_product(label, memory_mib) == product


def test_a_load_source_that_gives_nan_demand_is_unmeasured_and_inf_capacity_zero_with_notes(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    loads = FixedLoads({"language/m-large": ModelLoad(math.nan, 40.0),
                        "vision/resnet": ModelLoad(12.0, math.inf)})
    observed = make_backend(apiserver, clock, load=loads).reader.snapshot()
    by_name = {m.name: m for m in observed.models}
    large, resnet = by_name["language/m-large"], by_name["vision/resnet"]
    assert (large.demand_measured, large.demand_rps, large.capacity_rps) == (False, 0.0, 40.0)
    assert (resnet.demand_measured, resnet.demand_rps, resnet.capacity_rps) == (True, 12.0, 0.0)
    assert ("language/m-large: demand not measured this tick: the load source gave "
            "demand_rps=nan; not finite") in observed.notes
    assert "vision/resnet: the load source gave capacity_rps=inf; not finite, taken as 0" \
        in observed.notes
    # what the store writes is strict JSON again (NaN is not JSON; PostgreSQL refuses to read it)
    json.loads(observed_to_json(observed), parse_constant=_refuse)


def test_queued_requests_are_observed_and_a_negative_or_nan_queue_is_not_measured(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    loads = FixedLoads({"language/m-large": ModelLoad(40.0, 40.0, queued_requests=-3.0,
                                                      queue_growth_rps=math.inf),
                        "vision/resnet": ModelLoad(12.0, 20.0, queued_requests=7.0,
                                                   queue_growth_rps=0.5)})
    observed = make_backend(apiserver, clock, load=loads).reader.snapshot()
    by_name = {m.name: m for m in observed.models}
    resnet, large = by_name["vision/resnet"], by_name["language/m-large"]
    assert (resnet.queued_requests, resnet.queue_growth_rps) == (7.0, 0.5)
    assert (large.queued_requests, large.queue_growth_rps) == (None, None)
    assert "language/m-large: the load source gave queue_growth_rps=inf; not measured" \
        in observed.notes
    assert by_name["language/m-large"].demand_rps == 40.0  # the load itself stays measured
    assert "language/m-large: the load source gave queued_requests=-3.0; not measured" \
        in observed.notes
    loads = FixedLoads({"vision/resnet": ModelLoad(12.0, 20.0, queued_requests=math.nan)})
    observed = make_backend(apiserver, clock, load=loads).reader.snapshot()
    assert {m.name: m.queued_requests for m in observed.models}["vision/resnet"] is None
    json.loads(observed_to_json(observed), parse_constant=_refuse)


def test_a_draining_queues_negative_growth_is_observed_and_what_arrived_is_net_of_it(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    loads = FixedLoads({"vision/resnet": ModelLoad(12.0, 20.0, queued_requests=40.0,
                                                   queue_growth_rps=-2.0)})
    observed = make_backend(apiserver, clock, load=loads).reader.snapshot()
    resnet = {m.name: m for m in observed.models}["vision/resnet"]
    assert (resnet.demand_rps, resnet.queue_growth_rps, resnet.arrivals_rps) == (12.0, -2.0, 10.0)
    assert not [n for n in observed.notes if "queue_growth_rps" in n]


def test_a_kv_cache_usage_is_observed_and_one_outside_zero_to_one_is_not_measured(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    loads = FixedLoads({"language/m-large": ModelLoad(40.0, 40.0, kv_cache_usage=87.0),
                        "vision/resnet": ModelLoad(12.0, 20.0, kv_cache_usage=0.87)})
    observed = make_backend(apiserver, clock, load=loads).reader.snapshot()
    by_name = {m.name: m for m in observed.models}
    assert by_name["vision/resnet"].kv_cache_usage == 0.87
    # a percentage where a fraction belongs (a recording rule x 100, say) is no usage of 8,700 %
    assert by_name["language/m-large"].kv_cache_usage is None
    assert by_name["language/m-large"].demand_rps == 40.0
    assert "language/m-large: the load source gave kv_cache_usage=87.0; not measured" \
        in observed.notes


class Recording(FixedLoads):
    """Fixed loads that record every ``ready_replicas`` they were asked to measure."""

    def __init__(self, loads: dict[str, ModelLoad]) -> None:
        super().__init__(loads)
        self.asked: list[Mapping[str, int]] = []

    def measure(self, ready_replicas: Mapping[str, int], at: datetime) -> dict[str, ModelLoad]:
        self.asked.append(ready_replicas)
        return super().measure(ready_replicas, at)


def test_a_followers_reader_reads_the_fleet_without_asking_the_load_source(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    recording = Recording({})
    asked = recording.asked
    reader = make_backend(apiserver, clock, load=recording).reader
    leader_view, follower_view = reader.snapshot(), reader.without_load().snapshot()
    assert len(asked) == 1  # the leader's snapshot only
    assert follower_view.nodes == leader_view.nodes
    assert [m.name for m in follower_view.models] == [m.name for m in leader_view.models]


def test_a_workload_labelled_with_a_model_the_models_table_does_not_list_is_named_not_observed(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    apiserver.seed(model_deployment("bert-t4"))
    recording = Recording({
        "language/m-large": ModelLoad(30.0, 40.0), "vision/resnet": ModelLoad(900.0, 0.0),
        "bert-t4": ModelLoad(5.0, 0.0)})
    asked = recording.asked
    listed = ["language/m-large"]  # the models table, as serve's models in use read it
    reader = make_backend(apiserver, clock, models=lambda: listed, load=recording).reader
    observed = reader.snapshot()
    # no capacity-0 model for the two the table does not list, and their load is not read
    assert [m.name for m in observed.models] == ["language/m-large"]
    assert observed.measured_load_rps() == (30.0, 40.0)
    assert asked == [{"language/m-large": 2}]
    assert [note for note in observed.notes if "unmanaged" in note] == [
        "unmanaged: bert-t4 (Deployment models/bert-t4), vision/resnet (StatefulSet "
        "models/vision-resnet): labelled headroom.dev/model, not in the models table; Headroom "
        "neither measures, sizes nor scales them (`headroom models import` to manage one, or "
        "remove the label)"]
    listed.append("vision/resnet")  # imported: a model from the next snapshot on
    again = reader.snapshot()
    assert [m.name for m in again.models] == ["language/m-large", "vision/resnet"]
    assert [note for note in again.notes if note.startswith("unmanaged: ")] == [
        "unmanaged: bert-t4 (Deployment models/bert-t4): labelled headroom.dev/model, not in "
        "the models table; Headroom neither measures, sizes nor scales them (`headroom models "
        "import` to manage one, or remove the label)"]


def _refuse(constant: str) -> None:
    raise AssertionError(f"{constant} in the stored JSON")


def test_gpu_pods_count_workloads_a_drain_would_evict_and_sharing_follows_the_config_label(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4",
                            extra_labels={"nvidia.com/device-plugin.config": "headroom-mps-4"}))
    apiserver.seed(config_map("headroom-device-plugin-config", GPU_OPERATOR_NS, {
        "headroom-mps-4": device_plugin_entry(SharingLayout(SharingMode.MPS, 4), "mixed")}))
    apiserver.seed(gpu_node("l4-2", product="NVIDIA-L4", gpus=4, nodepool="l4",
                            sharing="time-slicing",
                            extra_labels={"nvidia.com/gpu.replicas": "3"}))
    gpu = {"nvidia.com/gpu": "1"}
    apiserver.seed(gpu_pod("serving", "l4-1", requests=gpu))
    apiserver.seed(gpu_pod("finished", "l4-1", requests=gpu, phase="Succeeded"))
    apiserver.seed(gpu_pod("plugin", "l4-1", namespace=GPU_OPERATOR_NS, requests=gpu,
                           owner_kind="DaemonSet"))
    apiserver.seed(gpu_pod("headroom-warm-l4-x", "l4-1", requests=gpu,
                           labels={"headroom.dev/warm-pool": "l4"}))
    apiserver.seed(gpu_pod("cpu-only", "l4-2", requests={}))
    nodes = {n.name: n for n in make_backend(apiserver, clock).reader.snapshot().nodes}
    assert nodes["l4-1"].gpu_pods == 1 and nodes["l4-2"].gpu_pods == 0
    assert (nodes["l4-1"].whole_gpus_in_use, nodes["l4-2"].whole_gpus_in_use) == (1, 0)
    assert {(g.sharing, g.sharing_replicas) for g in nodes["l4-1"].gpus} == {("mps", 4)}
    assert {(g.sharing, g.sharing_replicas) for g in nodes["l4-2"].gpus} == {("time_sliced", 3)}


def test_only_as_many_whole_gpus_are_synced_in_use_as_the_pods_on_the_node_request(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("a100-1", gpus=8, mig_config="all-disabled"))
    apiserver.seed(gpu_node("a100-2", gpus=2, mig_config="all-disabled"))
    apiserver.seed(gpu_pod("llm-tp2", "a100-1", requests={"nvidia.com/gpu": "2"}))
    apiserver.seed(gpu_pod("embed", "a100-1", requests={"nvidia.com/gpu": "1"}))
    apiserver.seed(gpu_pod("headroom-warm-a100-x", "a100-1", requests={"nvidia.com/gpu": "4"},
                           labels={"headroom.dev/warm-pool": "a100-80gb"}))
    apiserver.seed(gpu_pod("too-many", "a100-2", requests={"nvidia.com/gpu": "3"}))
    observed = make_backend(apiserver, clock).reader.snapshot()
    assert {n.name: n.whole_gpus_in_use for n in observed.nodes} == {"a100-1": 3, "a100-2": 2}
    synced = {n.name: [g.whole_in_use for g in n.gpus] for n in inventory_request(observed).nodes}
    # a warm-pool placeholder holds capacity for a replica to come, not a layout to keep
    assert synced["a100-1"] == [True] * 3 + [False] * 5
    assert synced["a100-2"] == [True, True]


def test_a_node_on_mig_parteds_all_enabled_reads_as_mig_on_without_instances_not_whole_gpus(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("a100-on", gpus=2, mig_config="all-enabled"))
    apiserver.seed(gpu_node("a100-off", gpus=2, mig_config="all-disabled"))
    nodes = {n.name: n for n in make_backend(apiserver, clock).reader.snapshot().nodes}
    assert {(g.mig_enabled, g.mig_layout, g.sharing) for g in nodes["a100-on"].gpus} == {
        (True, (), "mig")}
    assert {(g.mig_enabled, g.sharing) for g in nodes["a100-off"].gpus} == {(False, "exclusive")}


def test_a_node_whose_mig_config_failed_to_apply_offers_no_mig_instances(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("a100-failed", gpus=2, mig_config="all-1g.10gb", mig_state="failed"))
    apiserver.seed(gpu_node("a100-ok", gpus=2, mig_config="all-1g.10gb"))
    nodes = {n.name: n for n in make_backend(apiserver, clock).reader.snapshot().nodes}
    assert {(g.mig_enabled, g.mig_layout) for g in nodes["a100-failed"].gpus} == {(True, ())}
    assert {g.mig_layout for g in nodes["a100-ok"].gpus} == {("1g.10gb",) * 7}


def test_mig_instances_no_known_config_names_are_read_from_what_the_device_plugin_offers(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    offered = {"nvidia.com/mig-2g.20gb": "4", "nvidia.com/mig-3g.40gb": "2"}
    apiserver.seed(gpu_node("custom", gpus=2, mig_config="site-2g-3g", allocatable=offered))
    apiserver.seed(gpu_node("unlabelled", gpus=2, allocatable=offered))
    apiserver.seed(gpu_node("uneven", gpus=2, mig_config="site-odd",
                            allocatable={"nvidia.com/mig-2g.20gb": "3"}))
    for node in ("custom", "unlabelled", "uneven"):
        apiserver.seed(gpu_pod(f"{node}-pod", node, requests={"nvidia.com/mig-2g.20gb": "1"}))
    observed = make_backend(apiserver, clock).reader.snapshot()
    nodes = {n.name: n for n in observed.nodes}
    for name in ("custom", "unlabelled"):
        assert {(g.sharing, g.mig_layout) for g in nodes[name].gpus} == {
            ("mig", ("3g.40gb", "2g.20gb", "2g.20gb"))}
    # which GPU holds which instance is unknown: MIG on with none, not whole GPUs in use
    assert {(g.sharing, g.mig_layout) for g in nodes["uneven"].gpus} == {("mig", ())}
    synced = {n.name: n for n in inventory_request(observed).nodes}
    assert [[i.profile for i in g.mig_instances] for g in synced["custom"].gpus] == [
        ["3g.40gb", "2g.20gb", "2g.20gb"]] * 2
    assert not any(g.whole_in_use for n in synced.values() for g in n.gpus)


def test_time_sliced_mig_instances_the_device_plugin_renamed_shared_read_as_those_instances(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    # with renameByDefault: true the device plugin advertises a shared MIG instance as
    # nvidia.com/mig-<profile>.shared (REFERENCE.md §2.1): the same instances, not unknown ones
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("renamed", gpus=1,
                            allocatable={"nvidia.com/mig-1g.10gb.shared": "7"}))
    apiserver.seed(gpu_node("mixed", gpus=2, allocatable={
        "nvidia.com/mig-3g.40gb.shared": "2", "nvidia.com/mig-2g.20gb": "4"}))
    backend = make_backend(apiserver, clock)
    nodes = {n.name: n for n in backend.reader.snapshot().nodes}
    assert [(g.sharing, g.mig_layout) for g in nodes["renamed"].gpus] == [
        ("mig", ("1g.10gb",) * 7)]
    assert {(g.sharing, g.mig_layout) for g in nodes["mixed"].gpus} == {
        ("mig", ("3g.40gb", "2g.20gb", "2g.20gb"))}
    renamed = backend.reader.inventory().node("renamed")
    assert renamed is not None and offered_mig(renamed) == {"1g.10gb": 7}


def test_pods_asking_for_renamed_gpu_shares_hold_gpus_and_use_the_nodes_shared_gpus(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    # a device plugin configured with renameByDefault: true advertises time-sliced (or MPS)
    # GPUs as nvidia.com/gpu.shared: a node serving only such pods is not empty
    apiserver.seed(nodepool("l4", gpu_name="l4"))
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4",
                            sharing="time-slicing", extra_labels={"nvidia.com/gpu.replicas": "4"}))
    shared = {"nvidia.com/gpu.shared": "1"}
    apiserver.seed(gpu_pod("chat-0", "l4-1", requests=shared))
    apiserver.seed(gpu_pod("chat-1", "l4-1", requests=shared))
    backend = make_backend(apiserver, clock)
    nodes = {n.name: n for n in backend.reader.snapshot().nodes}
    assert nodes["l4-1"].gpu_pods == 2
    inventory = backend.reader.inventory()
    assert {p.name: p.gpu_requests for p in inventory.pods_on("l4-1")} == {
        "chat-0": {"nvidia.com/gpu.shared": 1}, "chat-1": {"nvidia.com/gpu.shared": 1}}
    node = inventory.node("l4-1")
    assert node is not None
    node_shares = {**node.allocatable, "nvidia.com/gpu.shared": "16"}
    renamed = replace(node, allocatable=node_shares)
    assert free_gpu_resources(renamed, inventory.pods_on("l4-1"))["nvidia.com/gpu.shared"] == 14


def test_a_pods_gpus_count_as_the_scheduler_counts_its_init_containers_and_sidecars(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(gpu_node("a100-1", gpus=8, mig_config="all-disabled"))
    warmup = gpu_pod("warmup-only", "a100-1", requests={"nvidia.com/gpu": "2"})
    spec = warmup["spec"]
    spec["initContainers"] = spec.pop("containers")
    spec["containers"] = [{"name": "server", "image": "example.com/triton:1"}]
    with_sidecar = gpu_pod("with-sidecar", "a100-1", requests={"nvidia.com/gpu": "1"})
    with_sidecar["spec"]["initContainers"] = [{
        "name": "proxy", "image": "example.com/proxy:1", "restartPolicy": "Always",
        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    apiserver.seed(warmup)
    apiserver.seed(with_sidecar)
    inventory = make_backend(apiserver, clock).reader.inventory()
    assert {p.name: p.gpu_requests for p in inventory.pods_on("a100-1")} == {
        "warmup-only": {"nvidia.com/gpu": 2}, "with-sidecar": {"nvidia.com/gpu": 2}}
    node = inventory.node("a100-1")
    assert node is not None
    assert free_gpu_resources(node, inventory.pods_on("a100-1")) == {"nvidia.com/gpu": 4}


def test_a_pod_whose_gpu_quantity_is_not_a_quantity_is_refused_naming_the_pod() -> None:
    bad = gpu_pod("odd", "a100-1", requests={"nvidia.com/gpu": "one"})
    with pytest.raises(ValueError, match=r"pod models/odd: nvidia.com/gpu is not a Kubernetes"):
        parse_pod(bad)


def test_a_listed_pod_whose_gpu_quantity_is_not_a_quantity_is_a_permanent_error_naming_it(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    # a real API server admits only quantities; a proxy or stub in between may not: the tick
    # records why it could not observe, rather than the job dying on a ValueError every tick
    seed_fleet(apiserver)
    apiserver.seed(gpu_pod("odd", "a100-1", requests={"nvidia.com/gpu": "one"}))
    with pytest.raises(PermanentError, match=r"cannot read: pod models/odd: nvidia.com/gpu"):
        make_backend(apiserver, clock).reader.snapshot()


def test_a_models_pods_no_node_has_bound_are_counted_unscheduled(apiserver: ApiServer,
                                                                clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    mine = {"app": "language-m-large"}  # its Deployment's selector
    # bound and still starting: pending, not unscheduled
    apiserver.seed(gpu_pod("m-large-1", "a100-1", labels=mine, ready=False, phase="Pending"))
    apiserver.seed(gpu_pod("m-large-2", "", labels=mine, ready=False, phase="Pending"))
    # no node for it either, but another workload's (and another namespace's) pod
    apiserver.seed(gpu_pod("batch-0", "", labels={"app": "batch"}, ready=False,
                           phase="Pending"))
    apiserver.seed(gpu_pod("m-large-elsewhere", "", namespace="default", labels=mine,
                           ready=False, phase="Pending"))
    observed = make_backend(apiserver, clock).reader.snapshot()
    large, resnet = observed.model("language/m-large"), observed.model("vision/resnet")
    assert large is not None and resnet is not None
    assert (large.replicas_pending, large.replicas_unscheduled) == (1, 1)
    assert resnet.replicas_unscheduled == 0
