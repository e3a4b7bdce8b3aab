"""SimCluster: nodes take provisioning time, replicas need capacity and a cold start, GPUs bill."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import Engine
from controlplane.settings import SimSettings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.cluster import SimCluster
from scheduler.domain import catalog
from scheduler.domain.usable_memory import whole_usable_mib

T0 = datetime(2026, 1, 5, tzinfo=UTC)
POOLS = (PoolSpec("l4", "L4", 4, 0, 8, 0.8),)
BERT = next(s for s in DEMO_MODELS if s.name == "bert-embed")
SIM = SimSettings(node_provision_s=(60, 60), image_pull_s=(30, 30), weight_load_s=(10, 10),
                  warmup_s=(10, 10), warm_node_start_s=8)


def _cluster() -> SimCluster:
    return SimCluster(POOLS, (BERT,), lambda _m, _at: 100.0, SIM, T0)


def test_a_new_node_is_ready_only_after_its_provisioning_time() -> None:
    cluster = _cluster()
    assert cluster.set_size("l4", 1).ok
    cluster.step(T0 + timedelta(seconds=59))
    assert cluster.snapshot().pool("l4").nodes_pending == 1  # type: ignore[union-attr]
    cluster.step(T0 + timedelta(seconds=60))
    assert cluster.snapshot().pool("l4").nodes_ready == 1  # type: ignore[union-attr]


def test_replicas_wait_for_capacity_then_pay_a_cold_start() -> None:
    cluster = _cluster()
    cluster.set_replicas("bert-embed", 2)
    cluster.set_size("l4", 1)
    cluster.step(T0 + timedelta(seconds=60))  # node ready; replicas bind, cold start 50 s
    model = cluster.snapshot().model("bert-embed")
    assert model is not None and model.replicas_ready == 0 and model.replicas_pending == 2
    cluster.step(T0 + timedelta(seconds=110))
    model = cluster.snapshot().model("bert-embed")
    assert model is not None and model.replicas_ready == 2
    assert model.capacity_rps == 2 * BERT.best_point().throughput_rps


def test_gpus_are_billed_from_the_request_not_from_readiness() -> None:
    cluster = _cluster()
    cluster.set_size("l4", 2)
    cluster.step(T0 + timedelta(hours=1))
    assert cluster.gpu_hours == 8.0
    assert cluster.cost_usd({"l4": 0.8}) == 8.0 * 0.8


def test_unknown_targets_fail_without_changing_anything() -> None:
    cluster = _cluster()
    assert not cluster.set_size("nope", 3).ok
    assert not cluster.set_replicas("nope", 3).ok
    assert cluster.snapshot().gpus_ready() == 0


def test_an_adopted_fleet_is_serving_at_its_targets_without_a_cold_start() -> None:
    cluster = _cluster()
    cluster.set_size("l4", 1)
    cluster.set_replicas("bert-embed", 2)
    cluster.adopt()
    model = cluster.snapshot().model("bert-embed")
    assert cluster.snapshot().pool("l4").nodes_ready == 1  # type: ignore[union-attr]
    assert model is not None and model.replicas_ready == 2 and model.replicas_pending == 0


def test_a_replica_added_after_adoption_starts_warm_on_the_adopted_node() -> None:
    cluster = _cluster()
    cluster.set_size("l4", 1)
    cluster.adopt()
    cluster.set_replicas("bert-embed", 1)  # the node has the image and weights: 8 s, not 50 s
    cluster.step(T0 + timedelta(seconds=8))
    model = cluster.snapshot().model("bert-embed")
    assert model is not None and model.replicas_ready == 1


def test_a_demo_vllm_model_on_a_whole_gpu_fits_vllms_default_share_of_its_usable_memory() -> None:
    # vLLM takes --gpu-memory-utilization 0.9 of what CUDA can use (REFERENCE.md §6.4, §1.3):
    # the 70B model is an AWQ-int4 build, not bf16 weights of ~140 GB
    for spec in DEMO_MODELS:
        for point in spec.profile:
            product = catalog.lookup(point.product)
            if spec.engine is Engine.VLLM and point.compute_slices == 0 and product is not None:
                assert point.memory_mib <= 0.9 * whole_usable_mib(product), spec.name
