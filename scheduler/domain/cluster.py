"""In-memory, indexed view of the inventory and its bindings for online placement.

The cluster is mutable (the engine owns it under a lock) but does no I/O: every decision is a
deterministic function of the inventory, the bindings and the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler.domain import catalog
from scheduler.domain.catalog import GpuProduct
from scheduler.domain.errors import AlreadyExists, Infeasible
from scheduler.domain.mig import MigInstance, free_start
from scheduler.domain.model import (
    WHOLE_GPU_MILLI,
    Binding,
    Isolation,
    NodeSpec,
    SharingMode,
    WorkloadSpec,
)
from scheduler.domain.sharing import MAX_CLIENTS_PER_GPU, mig_profile_for, share_mode


def product_key(product: str) -> str:
    """Canonical product key: the catalog name when known, else the lowercased string."""
    known = catalog.lookup(product)
    return known.name.lower() if known is not None else product.strip().lower()


@dataclass(slots=True)
class GpuSlot:
    """Mutable accounting of one GPU."""

    index: int
    product: str
    key: str
    known: GpuProduct | None
    memory_mib: int  # 0 = unknown
    mig_capable: bool
    free_milli: int = WHOLE_GPU_MILLI
    free_memory_mib: int = 0
    mode: SharingMode | None = None
    clients: int = 0
    mig: dict[str, MigInstance] = field(default_factory=dict)


@dataclass(slots=True)
class NodeSlot:
    """Mutable accounting of one node."""

    spec: NodeSpec
    cpu_free: int
    mem_free: int
    gpus: list[GpuSlot]


@dataclass(frozen=True, slots=True)
class Choice:
    """A candidate placement: node position, GPU positions, mode, MIG profile, share."""

    node: int
    gpus: tuple[int, ...]
    mode: SharingMode | None
    gpu_milli: int
    gpu_memory_mib: int
    mig_profile: str = ""
    mig_start: int = -1
    reason: str = ""


def make_slots(nodes: Sequence[NodeSpec]) -> list[NodeSlot]:
    slots: list[NodeSlot] = []
    for node in nodes:
        gpus: list[GpuSlot] = []
        for g in sorted(node.gpus, key=lambda x: x.index):
            known = catalog.lookup(g.product)
            memory = g.memory_mib or (known.memory_mib if known is not None else 0)
            mig_ok = g.mig_capable and known is not None and known.mig_capable
            gpus.append(GpuSlot(g.index, g.product, product_key(g.product), known, memory,
                                mig_ok, free_memory_mib=memory))
        slots.append(NodeSlot(node, node.cpu_milli, node.memory_mib, gpus))
    return slots


def gpu_memory_need(spec: WorkloadSpec, gpu: GpuSlot, milli: int) -> int | None:
    """GPU memory to charge on ``gpu``: the stated amount, else a proportional share of a GPU
    whose memory is known; None when the GPU cannot guarantee the stated memory."""
    if gpu.memory_mib <= 0:
        return None if spec.gpu_memory_mib > 0 else 0
    if spec.gpu_memory_mib > 0:
        return spec.gpu_memory_mib
    return gpu.memory_mib * milli // WHOLE_GPU_MILLI


class Cluster:
    """Nodes, GPUs and bindings; ``place`` and ``release`` keep the accounting exact."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        self.slots = make_slots(nodes)
        self.position = {s.spec.name: i for i, s in enumerate(self.slots)}
        self.bindings: dict[str, Binding] = {}

    @property
    def gpu_count(self) -> int:
        return sum(len(s.gpus) for s in self.slots)

    # ------------------------------------------------------------------ candidates
    def _allowed(self, spec: WorkloadSpec, gpu: GpuSlot) -> bool:
        return not spec.gpu_products or gpu.key in spec.gpu_products

    def share_choices(self, spec: WorkloadSpec, node: int) -> list[Choice]:
        """Every GPU of ``node`` that can host the fractional workload ``spec``."""
        out: list[Choice] = []
        for pos, gpu in enumerate(self.slots[node].gpus):
            if not self._allowed(spec, gpu):
                continue
            choice = self._share_on(spec, node, pos, gpu)
            if choice is not None:
                out.append(choice)
        return out

    def _share_on(self, spec: WorkloadSpec, node: int, pos: int, gpu: GpuSlot) -> Choice | None:
        mode = share_mode(spec.isolation)
        if mode is SharingMode.EXCLUSIVE:
            if gpu.mig_capable and gpu.known is not None and gpu.mode in (None, SharingMode.MIG):
                return self._mig_on(spec, node, pos, gpu, gpu.known)
            return self._whole_on(spec, node, pos, gpu, "strict_isolation_exclusive")
        if gpu.mode not in (None, mode) or gpu.clients >= MAX_CLIENTS_PER_GPU:
            return None
        if gpu.free_milli < spec.gpu_milli:
            return None
        need = gpu_memory_need(spec, gpu, spec.gpu_milli)
        if need is None or (gpu.memory_mib > 0 and need > gpu.free_memory_mib):
            return None
        return Choice(node, (pos,), mode, spec.gpu_milli, need, reason=f"{mode.value}_share")

    def _mig_on(self, spec: WorkloadSpec, node: int, pos: int, gpu: GpuSlot,
                product: GpuProduct) -> Choice | None:
        prof = mig_profile_for(product, spec.gpu_milli, spec.gpu_memory_mib)
        if prof is None:
            return self._whole_on(spec, node, pos, gpu, "strict_isolation_exclusive")
        start = free_start(product, list(gpu.mig.values()), prof)
        if start is None:
            return None
        milli = product.mig_milli(prof.compute_slices)
        return Choice(node, (pos,), SharingMode.MIG, milli, prof.memory_mib, prof.name, start,
                      "strict_isolation_mig")

    def _whole_on(self, spec: WorkloadSpec, node: int, pos: int, gpu: GpuSlot,
                  reason: str) -> Choice | None:
        if gpu.mode is not None or gpu.free_milli < WHOLE_GPU_MILLI:
            return None
        if gpu.memory_mib <= 0 and spec.gpu_memory_mib > 0:
            return None
        if gpu.memory_mib > 0 and spec.gpu_memory_mib > gpu.memory_mib:
            return None
        return Choice(node, (pos,), SharingMode.EXCLUSIVE, WHOLE_GPU_MILLI, gpu.memory_mib,
                      reason=reason)

    def whole_free(self, spec: WorkloadSpec, node: int) -> list[int]:
        """Positions of completely free GPUs of ``node`` that ``spec`` may use."""
        out: list[int] = []
        for pos, gpu in enumerate(self.slots[node].gpus):
            if gpu.mode is not None or gpu.free_milli < WHOLE_GPU_MILLI:
                continue
            if not self._allowed(spec, gpu):
                continue
            if spec.gpu_memory_mib > 0 and (gpu.memory_mib <= 0
                                            or spec.gpu_memory_mib > gpu.memory_mib):
                continue
            out.append(pos)
        return out

    def fits_host(self, spec: WorkloadSpec, node: int) -> bool:
        slot = self.slots[node]
        return slot.cpu_free >= spec.cpu_milli and slot.mem_free >= spec.memory_mib

    # ------------------------------------------------------------------ apply
    def apply(self, spec: WorkloadSpec, choice: Choice) -> Binding:
        if spec.workload_id in self.bindings:
            raise AlreadyExists(spec.workload_id)
        slot = self.slots[choice.node]
        slot.cpu_free -= spec.cpu_milli
        slot.mem_free -= spec.memory_mib
        indices: list[int] = []
        for pos in choice.gpus:
            gpu = slot.gpus[pos]
            indices.append(gpu.index)
            gpu.free_milli -= choice.gpu_milli
            gpu.free_memory_mib -= (gpu.memory_mib if choice.mode is SharingMode.EXCLUSIVE
                                    else choice.gpu_memory_mib)
            gpu.clients += 1
            gpu.mode = choice.mode
            if choice.mode is SharingMode.MIG and gpu.known is not None:
                prof = gpu.known.profile(choice.mig_profile)
                if prof is not None:
                    gpu.mig[spec.workload_id] = MigInstance(prof, choice.mig_start)
        binding = Binding(spec.workload_id, slot.spec.name, tuple(indices), choice.mode,
                          choice.mig_profile, choice.gpu_milli, choice.reason,
                          choice.gpu_memory_mib, choice.mig_start, spec.cpu_milli,
                          spec.memory_mib)
        self.bindings[spec.workload_id] = binding
        return binding

    def readopt(self, binding: Binding) -> bool:
        """Re-apply a binding from an earlier inventory; False (dropped) when its node or GPUs
        are gone or no longer have room."""
        node = self.position.get(binding.node)
        if node is None:
            return False
        slot = self.slots[node]
        by_index = {g.index: pos for pos, g in enumerate(slot.gpus)}
        if any(i not in by_index for i in binding.gpu_indices):
            return False
        if slot.cpu_free < binding.cpu_milli or slot.mem_free < binding.memory_mib:
            return False
        positions = tuple(by_index[i] for i in binding.gpu_indices)
        for pos in positions:
            gpu = slot.gpus[pos]
            if gpu.free_milli < binding.gpu_milli or gpu.mode not in (None, binding.mode):
                return False
        spec = WorkloadSpec(binding.workload_id, "", "", binding.cpu_milli, binding.memory_mib,
                            len(positions), binding.gpu_milli, 0, frozenset(),
                            Isolation.UNSPECIFIED)
        self.apply(spec, Choice(node, positions, binding.mode, binding.gpu_milli,
                                binding.gpu_memory_mib, binding.mig_profile, binding.mig_start,
                                binding.reason))
        return True

    def release(self, workload_id: str) -> Binding | None:
        """Give a binding's resources back; None when the id is unknown (idempotent)."""
        binding = self.bindings.pop(workload_id, None)
        if binding is None:
            return None
        slot = self.slots[self.position[binding.node]]
        slot.cpu_free += binding.cpu_milli
        slot.mem_free += binding.memory_mib
        by_index = {g.index: g for g in slot.gpus}
        for idx in binding.gpu_indices:
            gpu = by_index[idx]
            gpu.clients -= 1
            gpu.mig.pop(workload_id, None)
            if gpu.clients == 0:
                gpu.mode = None
                gpu.free_milli = WHOLE_GPU_MILLI
                gpu.free_memory_mib = gpu.memory_mib
            else:
                gpu.free_milli += binding.gpu_milli
                gpu.free_memory_mib += binding.gpu_memory_mib
        return binding


def infeasible(spec: WorkloadSpec) -> Infeasible:
    """The error for a workload no node can host, with the dominant reason."""
    if spec.num_gpu == 0:
        return Infeasible("insufficient_cpu_or_memory",
                          f"no node has {spec.cpu_milli} CPU milli and {spec.memory_mib} MiB free")
    what = (f"{spec.num_gpu} whole GPU(s)" if spec.is_whole
            else f"a {spec.gpu_milli}-milli GPU share")
    products = ",".join(sorted(spec.gpu_products)) or "any product"
    return Infeasible("no_node_fits",
                      f"no node has {what} ({products}) with {spec.cpu_milli} CPU milli and "
                      f"{spec.memory_mib} MiB free")
