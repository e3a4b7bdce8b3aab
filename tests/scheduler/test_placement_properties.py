"""Property tests (hypothesis) of online placement: invariants after every operation."""

from __future__ import annotations

import contextlib
from collections import defaultdict

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.domain import catalog, cluster
from scheduler.domain.errors import Infeasible
from scheduler.domain.mig import MigInstance, layout_violations
from scheduler.domain.model import (
    Binding,
    GpuSpec,
    Isolation,
    NodeSpec,
    SharingMode,
    WorkloadSpec,
)
from scheduler.domain.placer import OnlinePlacer
from scheduler.domain.scoring import NodeCache

PRODUCTS = [("T4", 15_360, False), ("G2", 0, False), ("A100-80GB", 81_920, True)]

nodes_st = st.lists(
    st.tuples(st.integers(0, 8), st.sampled_from(PRODUCTS), st.integers(2, 64),
              st.integers(8, 256)),
    min_size=1, max_size=5,
).map(lambda rows: [
    NodeSpec(f"n{i}", cpu * 1000, mem * 1024,
             tuple(GpuSpec(g, prod, gmem, mig) for g in range(gpus)))
    for i, (gpus, (prod, gmem, mig), cpu, mem) in enumerate(rows)])


@st.composite
def workload(draw: st.DrawFn, k: int) -> WorkloadSpec:
    kind = draw(st.sampled_from(["cpu", "share", "whole", "multi"]))
    gpus = {"cpu": 0, "share": 1, "whole": 1, "multi": draw(st.integers(2, 4))}[kind]
    milli = {"cpu": 0, "share": draw(st.integers(1, 999))}.get(kind, 1000)
    gpu_mem = draw(st.sampled_from([0, 0, 2048, 12_000])) if gpus else 0
    products = draw(st.sampled_from([frozenset(), frozenset({"t4"}),
                                     frozenset({"a100-80gb", "g2"})])) if gpus else frozenset()
    return WorkloadSpec(f"w{k}", "m", "t", draw(st.integers(0, 16)) * 1000,
                        draw(st.integers(0, 64)) * 1024, gpus, milli, gpu_mem, products,
                        draw(st.sampled_from(list(Isolation))))


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[NodeSpec], list[tuple[str, object]]]:
    nodes = draw(nodes_st)
    ops: list[tuple[str, object]] = []
    for k in range(draw(st.integers(1, 40))):
        if k and draw(st.integers(0, 4)) == 0:
            ops.append(("release", f"w{draw(st.integers(0, k - 1))}"))
        else:
            ops.append(("place", draw(workload(k))))
    return nodes, ops


@st.composite
def repeated_shapes(draw: st.DrawFn) -> tuple[list[NodeSpec], list[tuple[str, object]]]:
    """Like ``scenario`` but with requests of a few shapes only, so cached scores are reused."""
    nodes = draw(nodes_st)
    shapes = draw(st.lists(workload(0), min_size=1, max_size=3))
    ops: list[tuple[str, object]] = []
    for k in range(draw(st.integers(1, 60))):
        if k and draw(st.integers(0, 2)) == 0:
            ops.append(("release", f"w{draw(st.integers(0, k - 1))}"))
        else:
            ops.append(("place", WorkloadSpec(f"w{k}", *_fields(draw(st.sampled_from(shapes))))))
    return nodes, ops


def run(nodes: list[NodeSpec], ops: list[tuple[str, object]],
        check: bool, score_afresh: bool = False) -> list[Binding | None]:
    """Apply ``ops``; with ``score_afresh`` every Place scores every node from scratch (the
    cached per-shape scores are dropped first)."""
    placer = OnlinePlacer(nodes)
    asked: dict[str, WorkloadSpec] = {}
    out: list[Binding | None] = []
    for op, arg in ops:
        if op == "release":
            assert isinstance(arg, str)
            placer.release(arg)
            out.append(None)
        else:
            assert isinstance(arg, WorkloadSpec)
            if score_afresh:
                placer._scorer.scores.clear()
            try:
                out.append(placer.place(arg))
                asked[arg.workload_id] = arg
            except Infeasible:
                out.append(None)
        if check:
            assert_invariants(nodes, placer, asked)
    return out


def assert_invariants(nodes: list[NodeSpec], placer: OnlinePlacer,
                      asked: dict[str, WorkloadSpec]) -> None:
    by_name = {n.name: n for n in nodes}
    cpu: dict[str, int] = defaultdict(int)
    mem: dict[str, int] = defaultdict(int)
    milli: dict[tuple[str, int], int] = defaultdict(int)
    gmem: dict[tuple[str, int], int] = defaultdict(int)
    modes: dict[tuple[str, int], set[SharingMode | None]] = defaultdict(set)
    count: dict[tuple[str, int], int] = defaultdict(int)
    mig: dict[tuple[str, int], list[MigInstance]] = defaultdict(list)
    for b in placer.cluster.bindings.values():
        spec = asked[b.workload_id]
        node = by_name[b.node]
        cpu[b.node] += spec.cpu_milli
        mem[b.node] += spec.memory_mib
        assert len(set(b.gpu_indices)) == spec.num_gpu
        gpus = {g.index: g for g in node.gpus}
        for idx in b.gpu_indices:
            gpu = gpus[idx]
            key = (b.node, idx)
            milli[key] += b.gpu_milli
            modes[key].add(b.mode)
            count[key] += 1
            if spec.gpu_products:
                known = catalog.lookup(gpu.product)
                assert known is not None and known.name.lower() in spec.gpu_products
            memory = gpu.memory_mib
            charged = memory if b.mode is SharingMode.EXCLUSIVE else b.gpu_memory_mib
            gmem[key] += charged
            if spec.gpu_memory_mib:
                assert memory >= spec.gpu_memory_mib
            if b.mode is SharingMode.MIG:
                known = catalog.lookup(gpu.product)
                assert known is not None and gpu.mig_capable
                prof = known.profile(b.mig_profile)
                assert prof is not None
                mig[key].append(MigInstance(prof, b.mig_start))
        if spec.num_gpu:
            assert b.gpu_milli >= spec.gpu_milli
            if spec.is_whole:
                assert b.gpu_milli == 1000
    for name, used in cpu.items():
        assert used <= by_name[name].cpu_milli and mem[name] <= by_name[name].memory_mib
    for key, used in milli.items():
        assert used <= 1000, f"GPU {key} compute oversubscribed: {used}"
        assert len(modes[key]) == 1, f"GPU {key} mixes sharing modes {modes[key]}"
        if SharingMode.EXCLUSIVE in modes[key]:
            assert count[key] == 1
        gpu = next(g for g in by_name[key[0]].gpus if g.index == key[1])
        if gpu.memory_mib:
            assert gmem[key] <= gpu.memory_mib, f"GPU {key} memory oversubscribed"
    for key, layout in mig.items():
        gpu = next(g for g in by_name[key[0]].gpus if g.index == key[1])
        known = catalog.lookup(gpu.product)
        assert known is not None and not layout_violations(known, layout)


FAST = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FAST
@given(scenario())
def test_no_binding_oversubscribes_cpu_memory_gpu_compute_or_gpu_memory(
        case: tuple[list[NodeSpec], list[tuple[str, object]]]) -> None:
    run(*case, check=True)


@FAST
@given(scenario())
def test_same_input_gives_the_same_output(
        case: tuple[list[NodeSpec], list[tuple[str, object]]]) -> None:
    assert run(*case, check=False) == run(*case, check=False)


@FAST
@given(repeated_shapes(), st.sampled_from([1, 2, 5, cluster.MAX_CHANGE_LOG]))
def test_cached_scores_choose_what_scoring_every_node_afresh_would(
        case: tuple[list[NodeSpec], list[tuple[str, object]]], log_size: int) -> None:
    # Small clusters: every node scored for an older demand snapshot is rescored at once, so
    # the cache (change log, incremental best node) must reproduce a full scoring exactly,
    # also when the change log is emptied every few changes.
    saved = cluster.MAX_CHANGE_LOG
    cluster.MAX_CHANGE_LOG = log_size
    try:
        assert run(*case, check=False) == run(*case, check=False, score_afresh=True)
    finally:
        cluster.MAX_CHANGE_LOG = saved


@FAST
@given(nodes_st, st.lists(workload(0), min_size=1, max_size=12), workload(99))
def test_release_then_place_restores_capacity(nodes: list[NodeSpec],
                                              fill: list[WorkloadSpec],
                                              probe: WorkloadSpec) -> None:
    placer = OnlinePlacer(nodes)
    for k, spec in enumerate(fill):
        with contextlib.suppress(Infeasible):
            placer.place(WorkloadSpec(f"f{k}", *_fields(spec)))
    c = placer.cluster
    before = [a.copy() for a in (c.free, c.cpu_free, c.mem_free, c.gmem_free, c.mode, c.clients)]
    try:
        placer.place(probe)
    except Infeasible:
        return
    placer.release(probe.workload_id)
    after = (c.free, c.cpu_free, c.mem_free, c.gmem_free, c.mode, c.clients)
    assert all((x == y).all() for x, y in zip(before, after, strict=True))
    again = placer.place(WorkloadSpec("again", *_fields(probe)))
    assert again is not None


def _fields(spec: WorkloadSpec) -> tuple[str, str, int, int, int, int, int, frozenset[str],
                                         Isolation]:
    return (spec.model, spec.tenant, spec.cpu_milli, spec.memory_mib, spec.num_gpu,
            spec.gpu_milli, spec.gpu_memory_mib, spec.gpu_products, spec.isolation)


@FAST
@given(scenario())
def test_the_kept_node_waste_and_residual_equal_a_fresh_computation(
        case: tuple[list[NodeSpec], list[tuple[str, object]]]) -> None:
    nodes, ops = case
    placer = OnlinePlacer(nodes)
    for op, arg in ops:
        if op == "release":
            assert isinstance(arg, str)
            placer.release(arg)
        else:
            assert isinstance(arg, WorkloadSpec)
            with contextlib.suppress(Infeasible):
                placer.place(arg)
    scorer, c = placer._current_scorer(), placer.cluster
    fresh = NodeCache(scorer.tables, c.free, c.cpu_free, c.mem_free, placer.weights.stranding)
    assert np.allclose(scorer.cache.resid, fresh.resid)
    assert np.allclose(scorer.cache.waste, fresh.waste, rtol=1e-9, atol=1e-6)
