"""In-memory, indexed state of the inventory and its bindings for online placement.

The state is held in numpy arrays (one row per node, one column per GPU slot) so the scoring
of every candidate node is a handful of vectorised operations. It is mutable (the engine owns it
under a lock) but does no I/O: every decision is a function of inventory, bindings and request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.domain import catalog
from scheduler.domain.catalog import GpuProduct
from scheduler.domain.errors import AlreadyExists
from scheduler.domain.mig import MigInstance
from scheduler.domain.model import (
    WHOLE_GPU_MILLI,
    Binding,
    NodeSpec,
    SharingMode,
)
from scheduler.domain.readoption import GPU_GONE, NODE_GONE, gpu_release_reason
from scheduler.domain.routing import ReplicaSite
from scheduler.domain.sharing import MAX_CLIENTS_PER_GPU
from scheduler.domain.usable_memory import reported_usable_mib

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Mode codes of the per-GPU ``mode`` array (0 = idle, no sharing mode set yet).
MODE_CODE: dict[SharingMode, int] = {
    SharingMode.EXCLUSIVE: 1, SharingMode.MIG: 2, SharingMode.MPS: 3, SharingMode.TIME_SLICING: 4,
}
#: GPU memory of a GPU whose size is unknown: large enough never to bind.
UNKNOWN_MEMORY_MIB = 1 << 40
#: Length at which the change log is emptied (and a new epoch begins).
MAX_CHANGE_LOG = 1 << 16
#: Node contents remembered for their state ids (the memory is emptied past this many).
MAX_STATE_IDS = 1 << 20
#: product masks cached per inventory (a mask is one bool per GPU slot)
MAX_PRODUCT_MASKS = 64

def product_key(product: str) -> str:
    """Canonical product key: the catalog name when known, else the stripped, lowercased text."""
    known = catalog.lookup(product)
    return known.name.lower() if known is not None else product.strip().lower()


@dataclass(frozen=True, slots=True)
class Choice:
    """A candidate placement: node row, GPU columns, mode, granted share, MIG instance."""

    node: int
    gpus: tuple[int, ...]
    mode: SharingMode | None
    gpu_milli: int
    gpu_memory_mib: int  # per GPU
    mig_profile: str = ""
    mig_start: int = -1
    reason: str = ""
    waste_delta: float | None = None  # expected-waste increase of the node, when scored


class Cluster:
    """Nodes, GPUs and bindings; ``apply`` and ``release`` keep the accounting exact."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        self.nodes = tuple(nodes)
        n = len(self.nodes)
        width = max((len(x.gpus) for x in self.nodes), default=0) or 1
        self.width = width
        self.position = {x.name: i for i, x in enumerate(self.nodes)}
        self.cpu_free: IntArray = np.array([x.cpu_milli for x in self.nodes], dtype=np.int64)
        self.mem_free: IntArray = np.array([x.memory_mib for x in self.nodes], dtype=np.int64)
        # nodes that take new placements (not cordoned, ready); the others keep their bindings
        self.open: BoolArray = np.array([not x.unschedulable for x in self.nodes], dtype=bool)
        # Per GPU slot; a slot without a GPU has free milli -1 so that nothing ever fits there.
        self.free: IntArray = np.full((n, width), -1, dtype=np.int64)
        self.exists: BoolArray = np.zeros((n, width), dtype=bool)
        self.mode: IntArray = np.zeros((n, width), dtype=np.int64)
        self.clients: IntArray = np.zeros((n, width), dtype=np.int64)
        # clients each GPU serves: MPS shares stop at its product's MPS clients (48; 16 before
        # Volta), the other modes at MAX_CLIENTS_PER_GPU (``client_limits``)
        self.mps_clients: IntArray = np.full((n, width), MAX_CLIENTS_PER_GPU, dtype=np.int64)
        self._max_clients: IntArray = np.full((n, width), MAX_CLIENTS_PER_GPU, dtype=np.int64)
        self.gmem_total: IntArray = np.zeros((n, width), dtype=np.int64)
        self.gmem_free: IntArray = np.zeros((n, width), dtype=np.int64)
        self.gmem_known: BoolArray = np.zeros((n, width), dtype=bool)
        self.mig_capable: BoolArray = np.zeros((n, width), dtype=bool)
        self.product_id: IntArray = np.full((n, width), -1, dtype=np.int64)
        self.gpu_index: IntArray = np.full((n, width), -1, dtype=np.int64)
        self.products: list[str] = []  # product keys by id
        self.known: list[GpuProduct | None] = []
        self.mig: dict[tuple[int, int], dict[str, MigInstance]] = {}
        self.bindings: dict[str, Binding] = {}
        self._product_masks: dict[frozenset[str], BoolArray] = {}
        ids: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            for j, gpu in enumerate(sorted(node.gpus, key=lambda g: g.index)):
                key = product_key(gpu.product)
                if key not in ids:
                    ids[key] = len(self.products)
                    self.products.append(key)
                    self.known.append(catalog.lookup(gpu.product))
                known = self.known[ids[key]]
                # what CUDA can use: the node's report capped at the catalog's usable figure
                memory = reported_usable_mib(known, gpu.memory_mib)
                self.free[i, j] = WHOLE_GPU_MILLI
                self.exists[i, j] = True
                self.product_id[i, j] = ids[key]
                self.gpu_index[i, j] = gpu.index
                self.gmem_known[i, j] = memory > 0
                self.gmem_total[i, j] = memory if memory > 0 else UNKNOWN_MEMORY_MIB
                self.gmem_free[i, j] = self.gmem_total[i, j]
                self.mig_capable[i, j] = bool(gpu.mig_capable and known is not None
                                              and known.mig_capable)
                if known is not None:
                    self.mps_clients[i, j] = known.mps_clients
        self.gpu_count = int(self.exists.sum())
        # A node's state id names its contents (free CPU, memory, GPU milli, GPU memory,
        # clients and modes): a node that comes back to contents it had before gets the id it
        # had then, so caches keyed by state id stay valid across Place/Release pairs in any
        # order. Ids are interned in ``_state_ids`` (emptied past MAX_STATE_IDS; ids are never
        # reused, a forgotten contents just gets a new one).
        self.state_id: IntArray = np.zeros(n, dtype=np.int64)
        self._state_ids: dict[tuple[int, int, int, bytes, bytes, bytes, bytes], int] = {}
        self._next_state = 0
        # Rows whose state id changed, in order, so a cache can find what changed since it
        # last looked without comparing every node; ``log_epoch`` counts the times the log was
        # emptied (a cache that saw another epoch compares every node once).
        self.change_log: list[int] = []
        self.log_epoch = 0
        self._columns: dict[str, tuple[int, ...]] = {}  # GPU columns of each binding
        # Per node aggregates and per GPU share capacity, kept in step by _refresh_node.
        self.total: IntArray = np.maximum(self.free, 0).sum(axis=1)
        self.idle: IntArray = (self.free == WHOLE_GPU_MILLI).sum(axis=1)
        self.share_cap: dict[int, IntArray] = {
            MODE_CODE[m]: np.full((n, width), -1, dtype=np.int64)
            for m in (SharingMode.MPS, SharingMode.TIME_SLICING)}
        for i in range(n):
            self._refresh_node(i)
            self.state_id[i] = self._contents_id(i)

    def _refresh_node(self, node: int, cols: Sequence[int] | None = None) -> None:
        """Recompute the aggregates of one node after GPUs ``cols`` (default: all) changed."""
        free = self.free[node].tolist()
        self.total[node] = sum(f for f in free if f > 0)
        self.idle[node] = sum(1 for f in free if f == WHOLE_GPU_MILLI)
        for col in range(len(free)) if cols is None else cols:
            self._refresh_share_cap(node, col)

    def _refresh_share_cap(self, node: int, col: int) -> None:
        """Share capacity of one GPU per sharing mode: the largest share (milli) it can take,
        limited by free compute and by the proportional memory it would be charged; -1 when
        the GPU cannot take a share in that mode."""
        if not self.exists.item(node, col) or self.clients.item(node, col) >= MAX_CLIENTS_PER_GPU:
            for arr in self.share_cap.values():
                arr[node, col] = -1
            return
        cap = self.free.item(node, col)
        if self.gmem_known.item(node, col):
            total_mem = self.gmem_total.item(node, col)
            free_mem = self.gmem_free.item(node, col)
            # largest d with total_mem * d // 1000 <= free_mem
            cap = min(cap, ((free_mem + 1) * WHOLE_GPU_MILLI + total_mem - 1) // total_mem - 1)
        mode = self.mode.item(node, col)
        for code, arr in self.share_cap.items():
            arr[node, col] = cap if mode in (0, code) else -1
        if self.clients.item(node, col) >= self.mps_clients.item(node, col):
            self.share_cap[MODE_CODE[SharingMode.MPS]][node, col] = -1

    # ------------------------------------------------------------------ lookups
    def client_limits(self, mode: SharingMode | None) -> IntArray:
        """Clients each GPU slot serves in ``mode``: its MPS clients under MPS, else
        MAX_CLIENTS_PER_GPU."""
        return self.mps_clients if mode is SharingMode.MPS else self._max_clients

    def product_mask(self, products: frozenset[str]) -> BoolArray:
        """GPU slots whose product is one of ``products`` (all existing GPUs when empty).

        Cached per list, at most MAX_PRODUCT_MASKS of them (callers may name any products)."""
        mask = self._product_masks.get(products)
        if mask is None:
            if products:
                wanted = [k for k, p in enumerate(self.products) if p in products]
                mask = np.isin(self.product_id, wanted) & self.exists
            else:
                mask = self.exists.copy()
            if len(self._product_masks) >= MAX_PRODUCT_MASKS:
                self._product_masks.clear()
            self._product_masks[products] = mask
        return mask

    def hosts(self, cpu_milli: int, memory_mib: int) -> BoolArray:
        """The open nodes with this much CPU and memory free."""
        return (self.cpu_free >= cpu_milli) & (self.mem_free >= memory_mib) & self.open

    def product_of(self, node: int, gpu: int) -> GpuProduct | None:
        return self.known[int(self.product_id[node, gpu])]

    def mig_layout(self, node: int, gpu: int) -> list[MigInstance]:
        return list(self.mig.get((node, gpu), {}).values())

    def replica_site(self, binding: Binding) -> ReplicaSite:
        """Where a bound workload runs, for the routing hint: its node takes work or not, the
        GPU memory it may use (a MIG instance's, an exclusive GPU's, its charged share of a
        shared GPU; 0 unknown) and the least share of its GPUs' memory that the other
        replicas on them do not hold (its own charge is its own: alone on a GPU, 1)."""
        node = self.position[binding.node]
        cols = self._columns.get(binding.workload_id, ())
        known = [g for g in cols if self.gmem_known.item(node, g)]
        own_mib = _charged_mib(binding)
        free_fraction = min((min(1.0, (self.gmem_free.item(node, g) + own_mib)
                                 / self.gmem_total.item(node, g)) for g in known), default=1.0)
        memory_mib = binding.gpu_memory_mib  # a MIG instance's memory, a share's charge
        if binding.mode is SharingMode.EXCLUSIVE:
            memory_mib = min((self.gmem_total.item(node, g) for g in known), default=0)
        return ReplicaSite(binding.node, binding.mode, bool(self.open[node]), memory_mib,
                           free_fraction, "" if self.open[node] else "is cordoned or not ready")

    def replica_sites(self, workload_ids: Sequence[str], waiting: Mapping[str, Binding]
                      ) -> list[ReplicaSite | None]:
        """The site of each workload (None: not bound); one bound on a node this inventory
        does not have (``waiting``) is on a node that takes no work, with the memory its binding
        was charged (a MIG instance's, a share's; an exclusive GPU's is not known)."""
        gone = "is not in the inventory" + (
            "" if self.nodes else " (no SyncInventory since this server started)")
        out: list[ReplicaSite | None] = []
        for workload_id in workload_ids:
            bound = self.bindings.get(workload_id)
            held = waiting.get(workload_id) if bound is None else None
            out.append(self.replica_site(bound) if bound is not None
                       else None if held is None
                       else ReplicaSite(held.node, held.mode, False, _charged_mib(held), 1.0,
                                        gone))
        return out

    # ------------------------------------------------------------------ apply
    def apply(self, workload_id: str, cpu_milli: int, memory_mib: int, choice: Choice,
              model: str = "", tenant: str = "", gpu_products: tuple[str, ...] = (),
              gpu_memory_request_mib: int = 0) -> Binding:
        """Charge ``choice`` to the state and record the binding (of ``model`` for ``tenant``,
        with what its request asked of each GPU: ``gpu_products``, ``gpu_memory_request_mib``)."""
        if workload_id in self.bindings:
            raise AlreadyExists(workload_id)
        node = choice.node
        self.cpu_free[node] -= cpu_milli
        self.mem_free[node] -= memory_mib
        code = MODE_CODE[choice.mode] if choice.mode is not None else 0
        for g in choice.gpus:
            self.free[node, g] -= choice.gpu_milli
            charge = (self.gmem_total[node, g] if choice.mode is SharingMode.EXCLUSIVE
                      else choice.gpu_memory_mib)
            self.gmem_free[node, g] -= charge
            self.clients[node, g] += 1
            self.mode[node, g] = code
            if choice.mode is SharingMode.MIG:
                product = self.product_of(node, g)
                prof = product.profile(choice.mig_profile) if product is not None else None
                if prof is not None:
                    self.mig.setdefault((node, g), {})[workload_id] = MigInstance(
                        prof, choice.mig_start)
        self._refresh_node(node, choice.gpus)
        self._changed(node)
        self._columns[workload_id] = choice.gpus
        binding = Binding(
            workload_id, self.nodes[node].name,
            tuple(int(self.gpu_index[node, g]) for g in choice.gpus), choice.mode,
            choice.mig_profile, choice.gpu_milli, choice.reason, choice.gpu_memory_mib,
            choice.mig_start, cpu_milli, memory_mib, model=model, tenant=tenant,
            gpu_products=gpu_products, gpu_memory_request_mib=gpu_memory_request_mib)
        self.bindings[workload_id] = binding
        return binding

    def columns_of(self, node: int, gpu_indices: Sequence[int]) -> tuple[int, ...] | None:
        """GPU columns of ``node`` for GPU indices; None when one does not exist."""
        row = self.gpu_index[node]
        out: list[int] = []
        for idx in gpu_indices:
            hits = np.flatnonzero(row == idx)
            if hits.size == 0:
                return None
            out.append(int(hits[0]))
        return tuple(out)

    def release(self, workload_id: str) -> Binding | None:
        """Give a binding's resources back; None when the id is unknown (idempotent)."""
        binding = self.bindings.pop(workload_id, None)
        if binding is None:
            return None
        node = self.position[binding.node]
        self.cpu_free[node] += binding.cpu_milli
        self.mem_free[node] += binding.memory_mib
        cols = self._columns.pop(workload_id)
        for g in cols:
            self.clients[node, g] -= 1
            layout = self.mig.get((node, g))
            if layout is not None:
                layout.pop(workload_id, None)
                if not layout:
                    del self.mig[(node, g)]
            if self.clients[node, g] == 0:
                self.mode[node, g] = 0
                self.free[node, g] = WHOLE_GPU_MILLI
                self.gmem_free[node, g] = self.gmem_total[node, g]
            else:
                self.free[node, g] += binding.gpu_milli
                self.gmem_free[node, g] += binding.gpu_memory_mib
        self._refresh_node(node, cols)
        self._changed(node)
        return binding

    def _contents_id(self, node: int) -> int:
        """The state id of the node's current contents (a new id for contents not seen)."""
        key = (node, self.cpu_free.item(node), self.mem_free.item(node),
               self.free[node].tobytes(), self.gmem_free[node].tobytes(),
               self.clients[node].tobytes(), self.mode[node].tobytes())
        found = self._state_ids.get(key)
        if found is None:
            if len(self._state_ids) >= MAX_STATE_IDS:
                self._state_ids.clear()
            found = self._state_ids[key] = self._next_state
            self._next_state += 1
        return found

    def _changed(self, node: int) -> None:
        """Give a node that changed the id of its new contents and log the change."""
        self.state_id[node] = self._contents_id(node)
        log = self.change_log
        if len(log) >= MAX_CHANGE_LOG:
            log.clear()
            self.log_epoch += 1
        log.append(node)

    def restored(self, node: int, state: int) -> bool:
        """True when ``node`` is back in the state with id ``state``."""
        return bool(self.state_id[node] == state)

    def readopt(self, binding: Binding) -> tuple[str, str] | None:
        """Re-apply a binding from an earlier inventory (or another engine): None when kept,
        else (reason, detail) of why it cannot be, the reason one of ``RELEASE_REASONS``
        (``readoption``).

        Kept when its node and GPU indices exist and each GPU still meets the binding's own
        request (an allowed product, the per-GPU memory it stated, its MIG profile), even when
        the node's CPU or memory, or a GPU's memory, no longer cover every binding kept there:
        its pod still runs. The free amounts then go below zero, so its GPUs stay taken and
        nothing new lands where it would oversubscribe further (``hosts``, ``share_fits``,
        ``mig_choice`` and an exclusive GPU's ``free == WHOLE_GPU_MILLI`` all read them) until
        releases or a larger snapshot bring them back. A binding that does not fit beside the
        ones kept before it (sharing mode, compute, clients, MIG layout: only bindings that
        were never consistent, e.g. two engines' on different inventories) is not kept."""
        node = self.position.get(binding.node)
        if node is None:
            return NODE_GONE, f"node {binding.node} is not in the inventory"
        cols = self.columns_of(node, binding.gpu_indices)
        if cols is None:
            return GPU_GONE, (f"GPU(s) {list(binding.gpu_indices)} of node {binding.node} are "
                              "not all in the inventory")
        code = MODE_CODE[binding.mode] if binding.mode is not None else 0
        why = gpu_release_reason(self, binding, node, cols, code)
        if why is not None:
            return why
        self.apply(binding.workload_id, binding.cpu_milli, binding.memory_mib,
                   Choice(node, cols, binding.mode, binding.gpu_milli, binding.gpu_memory_mib,
                          binding.mig_profile, binding.mig_start, binding.reason))
        self.bindings[binding.workload_id] = binding  # as it was, its lease included
        return None

    def overcommitted(self) -> list[str]:
        """Nodes whose kept bindings need more CPU or memory, or more of a GPU's memory, than
        the inventory gives them (nothing new is placed there until that is undone)."""
        over = ((self.cpu_free < 0) | (self.mem_free < 0)
                | (self.exists & (self.gmem_free < 0)).any(axis=1))
        return [self.nodes[i].name for i in np.flatnonzero(over).tolist()]


def _charged_mib(binding: Binding) -> int:
    """The GPU memory a binding was charged per GPU, when that is what it may use (0: not known)."""
    return binding.gpu_memory_mib if binding.mode is not SharingMode.EXCLUSIVE else 0
