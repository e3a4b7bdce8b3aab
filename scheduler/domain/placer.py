"""OnlinePlacer: the inventory, the learned demand and the scores kept in step (no I/O, no lock;
the engine serialises calls)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from scheduler.domain.cluster import Cluster
from scheduler.domain.demand_model import DemandModel
from scheduler.domain.errors import AlreadyExists
from scheduler.domain.model import (
    Binding,
    NodeSpec,
    ReleasedBinding,
    SharingMode,
    WorkloadSpec,
)
from scheduler.domain.policy import ScoreCache, Scorer, choose
from scheduler.domain.scoring import FloatArray, NodeCache, ScoreTables, ScoreWeights


class OnlinePlacer:
    """Place and release workloads on one inventory snapshot."""

    def __init__(self, nodes: Sequence[NodeSpec], weights: ScoreWeights | None = None,
                 demand: DemandModel | None = None) -> None:
        self.cluster = Cluster(nodes)
        self.demand = demand or DemandModel()
        self.weights = weights or ScoreWeights()
        tables = ScoreTables(self.demand.snapshot(), self.cluster.width, self.weights)
        self._scorer = Scorer(tables, self._new_cache(tables), self.weights, ScoreCache())
        # Per binding: what its node's cached waste was before, to restore it on Release.
        self._undo: dict[str, tuple[int, int, float, FloatArray, float]] = {}

    def _new_cache(self, tables: ScoreTables) -> NodeCache:
        c = self.cluster
        return NodeCache(tables, c.free, c.cpu_free, c.mem_free, self.weights.stranding)

    def resynced(self, nodes: Sequence[NodeSpec], adopting: Sequence[Binding] = ()
                 ) -> tuple[OnlinePlacer, list[ReleasedBinding]]:
        """A placer for a new inventory snapshot that keeps the learned demand and every
        binding (its own and ``adopting``: those a journal restored) whose node and GPUs still
        exist and still meet its request (``Cluster.readopt``: kept even where the node is now
        overcommitted), and the bindings it released, with why. Bindings are taken in workload
        id order, so what is kept does not depend on the order they were placed in."""
        fresh = OnlinePlacer(nodes, self.weights, self.demand)
        released: list[ReleasedBinding] = []
        held = {b.workload_id: b for b in (*self.cluster.bindings.values(), *adopting)}
        for workload_id in sorted(held):
            binding = held[workload_id]
            why = fresh.cluster.readopt(binding)
            if why is None:
                fresh._refresh_node(fresh.cluster.position[binding.node])
            else:
                released.append(ReleasedBinding(binding, *why))
        return fresh, released

    def adopt(self, binding: Binding) -> bool:
        """Take on a binding made elsewhere (another engine on the same journal); False when
        its node or GPUs are not in this inventory or no longer meet its request
        (``Cluster.readopt``: a node it overcommits still takes it)."""
        if self.cluster.readopt(binding) is not None:
            return False
        self._refresh_node(self.cluster.position[binding.node])
        return True

    def place(self, spec: WorkloadSpec) -> Binding:
        """Bind ``spec``; raises AlreadyExists or Infeasible (state unchanged then)."""
        if spec.workload_id in self.cluster.bindings:
            raise AlreadyExists(spec.workload_id)
        self.demand.observe(spec)
        scorer = self._current_scorer()
        choice = choose(self.cluster, spec, scorer)
        node, cache = choice.node, scorer.cache
        shared_gpu_free = (int(self.cluster.free[node, choice.gpus[0]])
                           if choice.mode in (SharingMode.MPS, SharingMode.TIME_SLICING) else -1)
        undo = (scorer.tables.snapshot.version, int(self.cluster.state_id[node]),
                float(cache.waste[node]), cache.per_shape[node].copy(), float(cache.resid[node]))
        binding = self.cluster.apply(spec.workload_id, spec.cpu_milli, spec.memory_mib, choice,
                                     spec.model, spec.tenant, tuple(sorted(spec.gpu_products)),
                                     spec.gpu_memory_mib if spec.num_gpu else 0)
        self._undo[spec.workload_id] = undo
        if choice.waste_delta is None:
            self._refresh_node(node)
        else:  # the scoring pass already computed the node's new waste and fragments
            cache.placed(scorer.tables, node, choice.waste_delta, shared_gpu_free,
                         spec.gpu_milli)
        return binding

    def leased(self, workload_id: str, lease_s: float, expires_at_s: float) -> Binding | None:
        """The binding with its lease set (its resources untouched); None when not bound."""
        binding = self.cluster.bindings.get(workload_id)
        if binding is None:
            return None
        binding = replace(binding, lease_s=lease_s, lease_expires_at_s=expires_at_s)
        self.cluster.bindings[workload_id] = binding
        return binding

    def release(self, workload_id: str) -> Binding | None:
        """Free a workload's resources; None when the id is unknown (idempotent)."""
        binding = self.cluster.release(workload_id)
        if binding is None:
            return None
        node = self.cluster.position[binding.node]
        undo = self._undo.pop(workload_id, None)
        scorer = self._scorer
        if (undo is not None and undo[0] == scorer.tables.snapshot.version
                and self.cluster.restored(node, undo[1])):
            scorer.cache.restore(node, undo[2], undo[3], undo[4])
        else:
            self._refresh_node(node)
        return binding

    def _refresh_node(self, node: int) -> None:
        scorer, c = self._scorer, self.cluster
        scorer.cache.update(scorer.tables, node, c.free, c.cpu_free, c.mem_free)

    def _current_scorer(self) -> Scorer:
        scorer = self._scorer
        snapshot = self.demand.snapshot()
        if snapshot.version == scorer.tables.snapshot.version:
            return scorer
        tables = ScoreTables(snapshot, self.cluster.width, self.weights)
        cache = scorer.cache
        c = self.cluster
        if cache.shape_key != snapshot.shape_key:
            cache = self._new_cache(tables)
        else:
            cache.reweigh(tables, c.free, c.cpu_free, c.mem_free)
        self._scorer = Scorer(tables, cache, self.weights, scorer.scores)
        return self._scorer
