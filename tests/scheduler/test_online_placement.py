"""Online placement decisions of the OnlinePlacer (domain level, no gRPC)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.domain.cluster import MAX_PRODUCT_MASKS, product_key
from scheduler.domain.errors import AlreadyExists, Infeasible
from scheduler.domain.model import GpuSpec, Isolation, NodeSpec, SharingMode, WorkloadSpec
from scheduler.domain.placer import OnlinePlacer
from scheduler.domain.readoption import GPU_MEMORY, GPU_PRODUCT, NODE_GONE


def node(name: str, gpus: int = 2, product: str = "T4", cpu: int = 32_000,
         mem: int = 131_072, gpu_mem: int = 0, mig: bool = False) -> NodeSpec:
    return NodeSpec(name, cpu, mem, tuple(GpuSpec(i, product, gpu_mem, mig)
                                          for i in range(gpus)))


def work(wid: str, gpus: int = 1, milli: int = 1000, cpu: int = 1000, mem: int = 1024,
         gpu_mem: int = 0, products: frozenset[str] = frozenset(),
         isolation: Isolation = Isolation.UNSPECIFIED) -> WorkloadSpec:
    return WorkloadSpec(wid, "m", "t", cpu, mem, gpus, milli, gpu_mem, products, isolation)


def test_cpu_only_work_goes_where_cpu_is_not_needed_by_gpus() -> None:
    placer = OnlinePlacer([node("gpu-dense", gpus=8, product="G2", cpu=48_000),
                           node("cpu-rich", gpus=2, product="T4", cpu=104_000)])
    for k in range(20):  # teach the placer that GPU work needs ~6 cores per GPU
        placer.demand.observe(work(f"seen{k}", cpu=6000))
    binding = placer.place(work("cpu", gpus=0, milli=0, cpu=16_000))
    assert binding.node == "cpu-rich" and binding.gpu_indices == ()


def test_a_share_fills_the_gpu_where_it_leaves_the_smallest_fragment() -> None:
    placer = OnlinePlacer([node("n0", gpus=2)])
    for k in range(10):
        placer.demand.observe(work(f"seen{k}", milli=500))
        placer.demand.observe(work(f"seen-w{k}"))
    first = placer.place(work("a", milli=500))
    second = placer.place(work("b", milli=500))
    assert first.gpu_indices == second.gpu_indices  # 500 + 500 fill one GPU, one stays idle
    whole = placer.place(work("c"))
    assert whole.gpu_indices != first.gpu_indices and whole.gpu_milli == 1000


def test_multi_gpu_work_gets_distinct_idle_gpus_on_one_node() -> None:
    placer = OnlinePlacer([node("small", gpus=2), node("big", gpus=8, product="G2")])
    binding = placer.place(work("x", gpus=4))
    assert binding.node == "big" and len(set(binding.gpu_indices)) == 4
    assert binding.mode is SharingMode.EXCLUSIVE


def test_strict_share_gets_a_mig_instance_on_a_mig_capable_gpu() -> None:
    placer = OnlinePlacer([node("a100", gpus=1, product="A100-80GB", mig=True)])
    binding = placer.place(work("s", milli=250, isolation=Isolation.STRICT))
    assert binding.mode is SharingMode.MIG and binding.mig_profile == "2g.20gb"
    assert binding.gpu_milli >= 250
    other = placer.place(work("s2", milli=400, isolation=Isolation.STRICT))
    assert other.mig_profile == "3g.40gb" and other.mig_start == 4


def test_strict_share_without_mig_gets_a_whole_gpu() -> None:
    placer = OnlinePlacer([node("t4", gpus=1)])
    binding = placer.place(work("s", milli=100, isolation=Isolation.STRICT))
    assert binding.mode is SharingMode.EXCLUSIVE and binding.gpu_milli == 1000
    with pytest.raises(Infeasible):
        placer.place(work("t", milli=100))


def test_mps_and_time_slicing_never_share_a_gpu() -> None:
    placer = OnlinePlacer([node("n", gpus=1)])
    placer.place(work("trusted", milli=300, isolation=Isolation.TRUSTED))
    with pytest.raises(Infeasible) as err:
        placer.place(work("batch", milli=300, isolation=Isolation.NONE))
    assert err.value.reason == "no_gpu_share_fits"
    assert placer.place(work("trusted2", milli=300, isolation=Isolation.TRUSTED)).mode \
        is SharingMode.MPS


def test_stated_gpu_memory_is_never_oversubscribed() -> None:
    placer = OnlinePlacer([node("t4", gpus=1, gpu_mem=15_360)])
    placer.place(work("a", milli=100, gpu_mem=10_000))
    with pytest.raises(Infeasible):
        placer.place(work("b", milli=100, gpu_mem=6_000))
    placer.place(work("c", milli=100, gpu_mem=5_000))


def test_a_share_without_stated_memory_is_charged_its_share_of_gpu_memory() -> None:
    placer = OnlinePlacer([node("t4", gpus=1, gpu_mem=15_360)])
    placer.place(work("big", milli=100, gpu_mem=12_000))
    with pytest.raises(Infeasible):  # 300 milli = 4608 MiB > the 3360 MiB left
        placer.place(work("share", milli=300))
    assert placer.place(work("small", milli=200)).gpu_milli == 200


def test_a_refused_share_names_what_it_needs_of_a_node_not_what_a_node_has_free() -> None:
    placer = OnlinePlacer([node("n", gpus=1)])
    placer.place(work("batch", milli=700, isolation=Isolation.NONE))
    with pytest.raises(Infeasible) as err:
        placer.place(work("trusted", milli=400, cpu=2000, mem=4096, isolation=Isolation.TRUSTED))
    assert str(err.value) == (
        "no_gpu_share_fits: no GPU of the allowed products has 400 milli free in mps mode on a "
        "node with at least 2000 CPU milli and 4096 MiB memory free")
    with pytest.raises(Infeasible) as err:  # needing no CPU and no memory: no node clause
        placer.place(work("bare", milli=400, cpu=0, mem=0, isolation=Isolation.TRUSTED))
    assert str(err.value) == ("no_gpu_share_fits: no GPU of the allowed products has 400 milli "
                              "free in mps mode")
    with pytest.raises(Infeasible) as err:
        placer.place(work("whole", cpu=0, mem=0))
    assert str(err.value) == "no_idle_gpus: no 1 idle GPU(s) of the allowed products"


def test_stated_memory_needs_a_gpu_whose_memory_is_known() -> None:
    placer = OnlinePlacer([node("g2", gpus=1, product="G2")])
    with pytest.raises(Infeasible):
        placer.place(work("a", milli=100, gpu_mem=1000))


UNKNOWN_MEMORY = ("gpu_memory_unknown: {n} GPU(s) of the allowed products have room for it on a "
                  "node with at least 1000 CPU milli and 1024 MiB memory free but report "
                  "memory_mib 0 "
                  "(not known) in the inventory snapshot, so gpu_memory_mib 1000 cannot be "
                  "checked against them; sync their memory_mib, or state gpu_memory_mib 0")


@pytest.mark.parametrize(("gpus", "milli", "isolation"), [
    (1, 1000, Isolation.UNSPECIFIED), (2, 1000, Isolation.UNSPECIFIED),
    (1, 300, Isolation.NONE), (1, 300, Isolation.TRUSTED), (1, 300, Isolation.STRICT),
], ids=["whole-gpu", "two-gpus", "time-sliced-share", "mps-share", "strict-share"])
def test_stated_memory_on_idle_gpus_of_unknown_memory_is_refused_as_unknown_not_as_busy(
        gpus: int, milli: int, isolation: Isolation) -> None:
    placer = OnlinePlacer([node("g1", gpus=2, product="G1")])
    with pytest.raises(Infeasible) as err:
        placer.place(work("w", gpus=gpus, milli=milli, gpu_mem=1000, isolation=isolation))
    assert (err.value.reason, str(err.value)) == ("gpu_memory_unknown",
                                                  UNKNOWN_MEMORY.format(n=2))


def test_unknown_memory_is_the_reason_only_while_a_gpu_of_unknown_memory_has_room() -> None:
    placer = OnlinePlacer([node("t4", gpus=1, gpu_mem=15_360), node("g1", gpus=1, product="G1")])
    assert placer.place(work("on-t4", gpu_mem=1000)).node == "t4"  # the GPU of known memory
    with pytest.raises(Infeasible) as err:
        placer.place(work("w", gpu_mem=1000))
    assert str(err.value) == UNKNOWN_MEMORY.format(n=1)
    assert placer.place(work("on-g1")).node == "g1"  # no memory stated: G1 may take it
    with pytest.raises(Infeasible) as err:
        placer.place(work("w", gpu_mem=1000))
    assert err.value.reason == "no_idle_gpus"


def test_gpu_products_restrict_the_choice() -> None:
    placer = OnlinePlacer([node("t4"), node("v100", product="V100M32")])
    assert placer.place(work("v", products=frozenset({"v100-32gb"}))).node == "v100"
    with pytest.raises(Infeasible) as err:
        placer.place(work("x", products=frozenset({"h100-80gb"})))
    assert err.value.reason == "no_allowed_gpu_product"


def test_cpu_and_memory_limits_are_reasons() -> None:
    placer = OnlinePlacer([node("n", cpu=4000)])
    with pytest.raises(Infeasible) as err:
        placer.place(work("x", cpu=8000))
    assert err.value.reason == "insufficient_cpu_or_memory"


def test_duplicate_ids_are_rejected_and_nothing_changes() -> None:
    placer = OnlinePlacer([node("n")])
    placer.place(work("a"))
    with pytest.raises(AlreadyExists):
        placer.place(work("a"))
    assert len(placer.cluster.bindings) == 1


def test_release_is_idempotent_and_restores_capacity() -> None:
    placer = OnlinePlacer([node("n", gpus=1)])
    placer.place(work("a", milli=600))
    assert placer.release("a") is not None
    assert placer.release("a") is None
    assert placer.place(work("b")).gpu_milli == 1000


def test_resync_keeps_the_bindings_of_nodes_still_there_and_releases_the_others_saying_why(
        ) -> None:
    placer = OnlinePlacer([node("n0"), node("n1")])
    a = placer.place(work("a"))
    placer.place(work("b"))
    placer.place(work("c"))
    fresh, released = placer.resynced([node(a.node)])
    kept = set(fresh.cluster.bindings)
    assert "a" in kept and all(fresh.cluster.bindings[w].node == a.node for w in kept)
    gone = {"b", "c"} - kept
    assert [(r.binding.workload_id, r.reason) for r in released] == [
        (w, NODE_GONE) for w in sorted(gone)]


def _cut_cpu(cpu: int) -> list[NodeSpec]:
    return [node("n", gpus=2, product="L4", cpu=cpu, mem=32_000)]


def test_a_resync_that_shrinks_a_nodes_cpu_keeps_every_binding_and_hands_out_none_of_its_gpus(
        ) -> None:
    placer = OnlinePlacer(_cut_cpu(8000))
    x1, x2 = placer.place(work("x1", cpu=3000)), placer.place(work("x2", cpu=3000))
    assert (x1.gpu_indices, x2.gpu_indices) == ((0,), (1,))
    fresh, released = placer.resynced(_cut_cpu(4000))
    assert released == []
    assert fresh.cluster.bindings == {"x1": x1, "x2": x2}
    assert fresh.cluster.overcommitted() == ["n"]
    with pytest.raises(Infeasible) as err:  # even a request of no CPU: the node has -2000 free
        fresh.place(work("y", cpu=0, mem=0))
    assert err.value.reason == "insufficient_cpu_or_memory"
    assert "1 node(s) overcommitted" in str(err.value)
    fresh.release("x1")  # 1000 CPU milli free again, and GPU 0; GPU 1 is still x2's
    assert fresh.cluster.overcommitted() == []
    assert fresh.place(work("y", cpu=1000)).gpu_indices == (0,)
    with pytest.raises(Infeasible):
        fresh.place(work("z", cpu=0, mem=0))


def test_which_bindings_a_resync_keeps_does_not_depend_on_the_order_they_were_placed_in(
        ) -> None:
    def kept_after_a_cut(order: tuple[str, ...]) -> set[str]:
        placer = OnlinePlacer(_cut_cpu(8000))
        for workload_id in order:
            placer.place(work(workload_id, cpu=3000))
        fresh, _ = placer.resynced(_cut_cpu(4000))
        return set(fresh.cluster.bindings)

    assert kept_after_a_cut(("x1", "x2")) == kept_after_a_cut(("x2", "x1")) == {"x1", "x2"}


def test_a_resync_releases_a_binding_whose_gpu_is_now_another_product_or_too_small() -> None:
    a100 = product_key("A100-80GB")
    placer = OnlinePlacer([NodeSpec("n", 32_000, 131_072, (
        GpuSpec(0, "A100-80GB", 81_920, True), GpuSpec(1, "A100-80GB", 81_920, True),
        GpuSpec(2, "L4", 24_576, False)))])
    on_a100 = placer.place(work("on-a100", gpu_mem=60_000, products=frozenset({a100})))
    big = placer.place(work("big", gpu_mem=60_000))
    small = placer.place(work("small", gpu_mem=20_000))
    assert (on_a100.gpu_indices, big.gpu_indices, small.gpu_indices) == ((0,), (1,), (2,))
    fresh, released = placer.resynced([NodeSpec("n", 32_000, 131_072, (
        GpuSpec(0, "L4", 24_576, False), GpuSpec(1, "A100-40GB", 40_960, True),
        GpuSpec(2, "L4", 24_576, False)))])
    assert [(r.binding, r.reason) for r in released] == [
        (big, GPU_MEMORY), (on_a100, GPU_PRODUCT)]
    assert ("GPU 1 of node n has 40192 MiB usable, the binding asked for 60000 MiB"
            in released[0].detail)
    assert fresh.cluster.bindings == {"small": small}
    assert fresh.place(work("whole")).gpu_indices == (0,)  # the released GPUs are free again

def test_same_inventory_and_requests_give_the_same_bindings() -> None:
    def run() -> list[tuple[str, tuple[int, ...]]]:
        placer = OnlinePlacer([node(f"n{i}", gpus=4, cpu=48_000) for i in range(6)])
        out = []
        for k in range(40):
            gpus = (1 + k % 2) if k % 5 else 0
            milli = 0 if gpus == 0 else (250 if gpus == 1 and k % 3 == 0 else 1000)
            spec = work(f"w{k}", gpus=gpus, milli=milli, cpu=2000 + 500 * (k % 7))
            try:
                b = placer.place(spec)
                out.append((b.node, b.gpu_indices))
            except Infeasible:
                out.append(("-", ()))
        return out

    assert run() == run()


def test_a_node_back_to_contents_it_had_gets_the_state_id_it_had_in_any_release_order() -> None:
    placer = OnlinePlacer([node("n", gpus=2)])
    c = placer.cluster
    start = int(c.state_id[0])
    placer.place(work("a", milli=300))
    placer.place(work("b", milli=200))
    assert int(c.state_id[0]) != start
    placer.release("a")  # not the last change: the node's contents are new
    placer.release("b")
    assert int(c.state_id[0]) == start


def test_place_release_pairs_in_any_order_reuse_remembered_scores(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import scheduler.domain.policy as policy

    placer = OnlinePlacer([node(f"n{i}", gpus=4) for i in range(4)])
    probes = [work(f"p{k}", milli=100) for k in range(3)]

    def cycle(tag: str) -> list[tuple[str, tuple[int, ...]]]:
        out = []
        for p in probes:
            b = placer.place(work(f"{tag}-{p.workload_id}", milli=100))
            out.append((b.node, b.gpu_indices))
        for p in (probes[1], probes[0], probes[2]):  # not in reverse order
            placer.release(f"{tag}-{p.workload_id}")
        return out

    for k in range(5):  # early on the demand snapshot is rebuilt at 1, 2, 4, ... 16 requests
        cycle(f"warm{k}")
    first = cycle("first")  # requests 16-18; the next rebuild is at 32
    calls: list[int] = []
    real = policy._score_node

    def counted(*args: Any) -> tuple[float, int]:  # (cluster, node, shape, scorer)
        calls.append(args[1])
        return real(*args)

    monkeypatch.setattr(policy, "_score_node", counted)
    again = cycle("again")
    assert again == first
    assert calls == []


@pytest.mark.parametrize(("product", "gpu_mem", "profiles"), [
    ("H100-80GB", 81_559, ("4g.40gb", "3g.40gb")),
    ("H200-141GB", 143_771, ("4g.71gb", "3g.71gb")),
    ("A100-80GB", 81_920, ("4g.40gb", "3g.40gb")),
])
def test_a_valid_mig_geometry_is_not_refused_when_the_gpu_reports_less_than_its_profile_names(
        product: str, gpu_mem: int, profiles: tuple[str, ...]) -> None:
    # REFERENCE.md §1.4: 4g+3g is a maximal geometry of every 7-slice GPU; §1.3 / §11.5: profile
    # names overstate memory (an H100 reports 81559 MiB, its 4g.40gb + 3g.40gb name 81920).
    placer = OnlinePlacer([node("n0", gpus=1, product=product, gpu_mem=gpu_mem, mig=True)])
    four = placer.place(work("four", milli=570, isolation=Isolation.STRICT))
    three = placer.place(work("three", milli=420, isolation=Isolation.STRICT))
    assert (four.mig_profile, three.mig_profile) == profiles
    assert four.gpu_memory_mib + three.gpu_memory_mib <= gpu_mem


def test_refused_places_naming_ever_new_products_keep_the_product_mask_cache_bounded() -> None:
    """A caller may name any GPU products; each list used to leave a mask the size of the whole
    inventory in a cache that only the next SyncInventory emptied."""
    placer = OnlinePlacer([node("n0", gpus=2)])
    for k in range(3 * MAX_PRODUCT_MASKS):
        with pytest.raises(Infeasible):
            placer.place(work(f"w{k}", products=frozenset({f"NOPE-{k}"})))
    assert len(placer.cluster._product_masks) <= MAX_PRODUCT_MASKS
    assert placer.place(work("t4", products=frozenset({product_key("T4")}))).node == "n0"
