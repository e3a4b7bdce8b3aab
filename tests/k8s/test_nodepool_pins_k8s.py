"""A pool's Karpenter NodePool must launch only the pool's GPU product and shape (REFERENCE.md
§8.1: requirements on the instance type or the GPU name, count and memory): the warm
placeholders ask for no GPU, so nothing else makes Karpenter pick an instance of
``gpus_per_node`` GPUs, and a MIG geometry is planned for one product (``a100`` alone admits both
the A100-40GB (p4d) and the A100-80GB (p4de)). A NodePool that does not pin them is named in
every tick's notes, whatever its product; MIG relayouts on a MIG-capable pool are refused for
good (turning MIG off stays allowed), and nothing else is refused."""

from __future__ import annotations

from typing import Any

from apiserver import ApiServer
from k8s_builders import gpu_node, nodepool
from k8s_harness import leading
from relayout_scenario import FROM, SLICE, TARGET, relayout_actuator

from controlplane.domain.mig_layout import builtin_layout
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.sim.clock import VirtualClock
from controlplane.store.relayout import MemoryRelayoutStore

UNPINNED_NOTE = (
    "pool a100-80gb: Karpenter NodePool a100-80gb may launch other GPUs than 8 x A100-80GB: "
    "its requirements lack karpenter.k8s.aws/instance-gpu-count In [8], "
    "karpenter.k8s.aws/instance-gpu-memory In [81920] (or pin node.kubernetes.io/instance-type);"
    " MIG relayouts on this pool are refused (nodepool_not_pinned)")



def _pinning(note: str) -> bool:
    """A note on a pool's NodePool pins (its 1-GPU test node's count is noted apart)."""
    return note.startswith("pool ") and "Karpenter NodePool" in note


def seed(server: ApiServer, pool: dict[str, Any]) -> None:
    server.seed(pool)
    server.seed(nodepool("l4", gpu_name="l4"))
    server.seed(gpu_node("a100-1", gpus=1, mig_config=FROM, allocatable={SLICE: "7"}))


def test_a_mig_relayout_on_a_pool_whose_nodepool_admits_other_gpus_is_refused_naming_it(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver, nodepool("a100-80gb", pinned=False))
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    outcome = actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
    assert not outcome.ok and not outcome.retryable
    assert outcome.message == f"node a100-1: {UNPINNED_NOTE}"
    assert store.active_relayouts() == ()
    assert [n for n in actuator.reader.snapshot().notes if _pinning(n)] == [
        UNPINNED_NOTE]


def test_turning_mig_off_on_such_a_pool_is_still_allowed(apiserver: ApiServer,
                                                         clock: VirtualClock) -> None:
    seed(apiserver, nodepool("a100-80gb", pinned=False))
    actuator = relayout_actuator(apiserver, clock, MemoryRelayoutStore())
    all_disabled = builtin_layout("A100-80GB", "all-disabled")
    assert all_disabled is not None
    off = actuator.start_relayout("a100-1", all_disabled, "drain")
    assert off.ok, off.message


def test_a_nodepool_pinning_the_gpu_count_and_memory_is_accepted(apiserver: ApiServer,
                                                                  clock: VirtualClock) -> None:
    seed(apiserver, nodepool("a100-80gb"))
    actuator = relayout_actuator(apiserver, clock, MemoryRelayoutStore())
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    assert [n for n in actuator.reader.snapshot().notes if _pinning(n)] == []


def test_a_nodepool_pinning_the_instance_type_is_accepted(apiserver: ApiServer,
                                                          clock: VirtualClock) -> None:
    pool = nodepool("a100-80gb", pinned=False)
    pool["spec"]["template"]["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In",
         "values": ["p4de.24xlarge"]}]
    seed(apiserver, pool)
    actuator = relayout_actuator(apiserver, clock, MemoryRelayoutStore())
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    assert [n for n in actuator.reader.snapshot().notes if _pinning(n)] == []


def test_a_nodepool_naming_another_gpu_is_refused(apiserver: ApiServer,
                                                  clock: VirtualClock) -> None:
    pool = nodepool("a100-80gb")
    pool["spec"]["template"]["spec"]["requirements"][0]["values"] = ["a100", "h100"]
    seed(apiserver, pool)
    actuator = relayout_actuator(apiserver, clock, MemoryRelayoutStore())
    outcome = actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
    assert not outcome.ok and "karpenter.k8s.aws/instance-gpu-name In [a100]" in outcome.message


def test_an_unpinned_nodepool_of_a_pool_without_mig_is_named_and_refuses_nothing(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    apiserver.seed(nodepool("a100-80gb"))
    apiserver.seed(nodepool("l4", gpu_name="l4", pinned=False))  # any L4 count per instance
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    actuator = relayout_actuator(apiserver, clock, MemoryRelayoutStore())
    backend = leading(apiserver, clock)
    assert [n for n in actuator.reader.snapshot().notes if _pinning(n)] == [
        "pool l4: Karpenter NodePool l4 may launch other GPUs than 4 x L4: its requirements "
        "lack karpenter.k8s.aws/instance-gpu-count In [4] (or pin "
        "node.kubernetes.io/instance-type); its warm placeholders ask for no GPU, so the nodes "
        "they hold may not be what the plan counts (nodepool_not_pinned)"]
    resized = backend.node_pools.set_size("l4", 2)
    slicing = SharingLayout(SharingMode.TIME_SLICING, 2)
    assert not backend.sharing.apply_sharing("l4-1", slicing).ok  # its config propagates first
    clock.advance(120)
    assert backend.elector.try_acquire_or_renew(clock.now())
    shared = backend.sharing.apply_sharing("l4-1", slicing)
    assert resized.ok and shared.ok, (resized.message, shared.message)
