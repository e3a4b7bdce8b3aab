"""Validation of inventory, Place, PlanFleet, RankReplicas, Release, RenewLeases and ListBindings
requests: every error names its field."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler.domain import catalog
from scheduler.domain.cluster import product_key
from scheduler.domain.errors import InvalidArgument
from scheduler.domain.fleet_types import FleetRequest, ProfilePoint
from scheduler.domain.model import WHOLE_GPU_MILLI, GpuSpec, NodeSpec, WorkloadSpec
from scheduler.domain.names import (
    MAX_LABEL_KEY_CHARS,
    MAX_LABEL_VALUE_CHARS,
    MAX_MIG_PROFILE_CHARS,
    MAX_MODEL_CHARS,
    MAX_NAME_CHARS,
    MAX_PRODUCT_CHARS,
    MAX_TENANT_CHARS,
    MAX_WORKLOAD_ID_CHARS,
    check_name,
    name_problem,
)
from scheduler.domain.routing import ReplicaLoad

MAX_GPUS_PER_NODE = 64
#: The longest lease a Place may ask (30 days): a lease is a dead client's leak bound, and one
#: beyond any deployment's life (1e300 s) is a unit mistake, not a lease.
MAX_LEASE_S = 30 * 24 * 3600
#: LoRA adapters one RankReplicas replica may list (vLLM's --max-loras is far below this)
MAX_ADAPTERS = 1000
#: A PlanFleet pool may offer at most this many GPUs (the plan is built GPU by GPU).
MAX_POOL_GPUS = 100_000
#: Prices above this per GPU-hour are taken for a unit mistake (costs must stay finite).
MAX_PRICE_PER_GPU_HOUR = 1e6


def validate_nodes(nodes: Sequence[NodeSpec]) -> None:
    """Raise InvalidArgument for a malformed inventory snapshot."""
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        where = f"nodes[{i}]"
        if not node.name.strip():
            raise InvalidArgument(f"{where}.name", "must not be empty or blank")
        if node.name != node.name.strip():  # "a" and "a " would be two nodes
            raise InvalidArgument(f"{where}.name", f"{node.name!r} begins or ends with "
                                  "whitespace, which no Kubernetes node name has")
        check_name(f"{where}.name", node.name, MAX_NAME_CHARS)
        if node.name in seen:
            raise InvalidArgument(f"{where}.name", f"duplicate node name {node.name!r}")
        seen.add(node.name)
        check_name(f"{where}.pool", node.pool, MAX_NAME_CHARS)
        _validate_labels(where, node.labels)
        if node.cpu_milli < 0:
            raise InvalidArgument(f"{where}.cpu_milli", f"must be >= 0, got {node.cpu_milli}")
        if node.memory_mib < 0:
            raise InvalidArgument(f"{where}.memory_mib", f"must be >= 0, got {node.memory_mib}")
        if len(node.gpus) > MAX_GPUS_PER_NODE:
            raise InvalidArgument(f"{where}.gpus", f"at most {MAX_GPUS_PER_NODE} GPUs per node")
        indices: set[int] = set()
        for k, gpu in enumerate(node.gpus):
            gwhere = f"{where}.gpus[{k}]"
            if gpu.index < 0:
                raise InvalidArgument(f"{gwhere}.index", f"must be >= 0, got {gpu.index}")
            if gpu.index in indices:
                raise InvalidArgument(f"{gwhere}.index", f"duplicate GPU index {gpu.index}")
            indices.add(gpu.index)
            if not gpu.product.strip():
                raise InvalidArgument(f"{gwhere}.product", "must not be empty or blank")
            check_name(f"{gwhere}.product", gpu.product, MAX_PRODUCT_CHARS)
            if gpu.memory_mib < 0:
                raise InvalidArgument(f"{gwhere}.memory_mib", f"must be >= 0, got {gpu.memory_mib}")
            _validate_held(gwhere, gpu)


def _validate_labels(where: str, labels: Sequence[tuple[str, str]]) -> None:
    """Each label's key and value: a key's problem names the labels (not the key), a value's
    its key."""
    for key, value in labels:
        problem = name_problem(key, MAX_LABEL_KEY_CHARS)
        if problem is not None:
            raise InvalidArgument(f"{where}.labels", f"a key of {problem}")
        check_name(f"{where}.labels[{key}]", value, MAX_LABEL_VALUE_CHARS)


def _validate_held(where: str, gpu: GpuSpec) -> None:
    """What a GPU holds now: named instances at non-negative starts, or whole, not both. A
    well-formed layout the product cannot hold is no error: PlanFleet just never keeps it."""
    if gpu.mig_instances and gpu.whole_in_use:
        raise InvalidArgument(f"{where}.whole_in_use",
                              "a GPU with mig_instances has MIG on: it is not a whole GPU")
    for k, held in enumerate(gpu.mig_instances):
        if not held.profile.strip():
            raise InvalidArgument(f"{where}.mig_instances[{k}].profile",
                                  "must not be empty or blank")
        check_name(f"{where}.mig_instances[{k}].profile", held.profile, MAX_MIG_PROFILE_CHARS)
        check_name(f"{where}.mig_instances[{k}].model", held.model, MAX_MODEL_CHARS)
        if held.start is not None and held.start < 0:
            raise InvalidArgument(f"{where}.mig_instances[{k}].start",
                                  f"must be >= 0, got {held.start}")


def validate_workload(spec: WorkloadSpec, raw_gpu_milli: int) -> None:
    """Raise InvalidArgument for a malformed Place request (``raw_gpu_milli`` as sent)."""
    if not spec.workload_id.strip():
        raise InvalidArgument("workload_id", "must not be empty or blank")
    check_name("workload_id", spec.workload_id, MAX_WORKLOAD_ID_CHARS)
    check_name("model", spec.model, MAX_MODEL_CHARS)
    check_name("tenant", spec.tenant, MAX_TENANT_CHARS)
    if spec.cpu_milli < 0:
        raise InvalidArgument("cpu_milli", f"must be >= 0, got {spec.cpu_milli}")
    if spec.memory_mib < 0:
        raise InvalidArgument("memory_mib", f"must be >= 0, got {spec.memory_mib}")
    if spec.num_gpu < 0:
        raise InvalidArgument("num_gpu", f"must be >= 0, got {spec.num_gpu}")
    if spec.num_gpu > MAX_GPUS_PER_NODE:
        raise InvalidArgument("num_gpu", f"must be <= {MAX_GPUS_PER_NODE}, got {spec.num_gpu}")
    if not 0 <= raw_gpu_milli <= WHOLE_GPU_MILLI:
        raise InvalidArgument("gpu_milli", f"must be in [0, 1000], got {raw_gpu_milli}")
    if not (math.isfinite(spec.lease_s) and spec.lease_s >= 0):
        raise InvalidArgument("lease_s", f"must be a finite number >= 0, got {spec.lease_s}")
    if spec.lease_s > MAX_LEASE_S:
        raise InvalidArgument("lease_s", f"must be <= {MAX_LEASE_S} (30 days), got "
                              f"{spec.lease_s:g}")
    if spec.num_gpu == 0 and raw_gpu_milli > 0:
        raise InvalidArgument("gpu_milli", "must be 0 when num_gpu is 0")
    if spec.gpu_memory_mib < 0:
        raise InvalidArgument("gpu_memory_mib", f"must be >= 0, got {spec.gpu_memory_mib}")
    if spec.num_gpu == 0 and spec.gpu_memory_mib > 0:
        raise InvalidArgument("gpu_memory_mib", "must be 0 when num_gpu is 0")
    if spec.num_gpu == 0 and spec.gpu_products:  # as gpu_milli and gpu_memory_mib: no GPU
        raise InvalidArgument("gpu_products", "must be empty when num_gpu is 0")


def _finite(value: float) -> bool:
    return math.isfinite(value)


def check_new_name(field: str, name: str, seen: set[str], what: str) -> None:
    """Raise InvalidArgument when ``name`` is empty or one of ``seen`` (a duplicate ``what``);
    else add it to ``seen``."""
    if not name:
        raise InvalidArgument(field, "must not be empty")
    if name in seen:
        raise InvalidArgument(field, f"duplicate {what} {name!r}")
    seen.add(name)


def validate_fleet_request(request: FleetRequest) -> None:
    """Raise InvalidArgument for a malformed PlanFleet request."""
    seen: set[str] = set()
    for i, m in enumerate(request.models):
        where = f"models[{i}]"
        check_name(f"{where}.model", m.model, MAX_MODEL_CHARS)
        check_new_name(f"{where}.model", m.model, seen, "model")
        check_name(f"{where}.tenant", m.tenant, MAX_TENANT_CHARS)
        if not _finite(m.rate_rps) or m.rate_rps < 0:
            raise InvalidArgument(f"{where}.rate_rps", f"must be a finite number >= 0, got "
                                                       f"{m.rate_rps}")
        if not _finite(m.latency_slo_ms) or m.latency_slo_ms <= 0:
            raise InvalidArgument(f"{where}.latency_slo_ms",
                                  f"must be a finite number > 0, got {m.latency_slo_ms}")
        if not _finite(m.cold_start_s) or m.cold_start_s < 0:
            raise InvalidArgument(f"{where}.cold_start_s",
                                  f"must be a finite number >= 0, got {m.cold_start_s}")
        for j, p in enumerate(m.profile):
            pw = f"{where}.profile[{j}]"
            if not p.product.strip():
                raise InvalidArgument(f"{pw}.product", "must not be empty")
            check_name(f"{pw}.product", p.product, MAX_PRODUCT_CHARS)
            _check_slices(p, f"{pw}.compute_slices")
            if p.batch_size < 1:
                raise InvalidArgument(f"{pw}.batch_size", f"must be >= 1, got {p.batch_size}")
            if not 1 <= p.mps_processes <= catalog.MAX_MPS_CLIENTS:
                raise InvalidArgument(f"{pw}.mps_processes",
                                      f"must be 1 to {catalog.MAX_MPS_CLIENTS} (CUDA MPS's "
                                      f"client limit per GPU), got {p.mps_processes}")
            for name, value in (("throughput_rps", p.throughput_rps),
                                ("latency_ms", p.latency_ms)):
                if not _finite(value) or value < 0:
                    raise InvalidArgument(f"{pw}.{name}", f"must be a finite number >= 0, got "
                                                          f"{value}")
            if p.memory_mib < 0:
                raise InvalidArgument(f"{pw}.memory_mib", f"must be >= 0, got {p.memory_mib}")
            if (problem := tensor_parallel_problem(p.gpus, p.compute_slices,
                                                   p.mps_processes)) is not None:
                raise InvalidArgument(f"{pw}.gpus", problem)  # the proto's 0 came as 1
    products: set[str] = set()
    for i, pool in enumerate(request.pools):
        where = f"pools[{i}]"
        if not pool.product.strip():
            raise InvalidArgument(f"{where}.product", "must not be empty")
        check_name(f"{where}.product", pool.product, MAX_PRODUCT_CHARS)
        key = product_key(pool.product)
        if key in products:
            raise InvalidArgument(f"{where}.product", f"duplicate pool {pool.product!r}")
        products.add(key)
        if not 0 <= pool.max_gpus <= MAX_POOL_GPUS:
            raise InvalidArgument(f"{where}.max_gpus",
                                  f"must be in [0, {MAX_POOL_GPUS}], got {pool.max_gpus}")
        if not 0 <= pool.gpus_per_node <= MAX_GPUS_PER_NODE:
            raise InvalidArgument(f"{where}.gpus_per_node", f"must be in [0, "
                                  f"{MAX_GPUS_PER_NODE}], got {pool.gpus_per_node}")
        price = pool.price_per_gpu_hour
        if not _finite(price) or not 0 <= price <= MAX_PRICE_PER_GPU_HOUR:
            raise InvalidArgument(f"{where}.price_per_gpu_hour",
                                  f"must be a finite number in [0, {MAX_PRICE_PER_GPU_HOUR:g}], "
                                  f"got {price}")
    for i, warm in enumerate(request.warm or ()):
        if not warm.product.strip():
            raise InvalidArgument(f"warm.pools[{i}].product", "must not be empty")
        check_name(f"warm.pools[{i}].product", warm.product, MAX_PRODUCT_CHARS)
        if not 0 <= warm.gpus <= MAX_POOL_GPUS:
            raise InvalidArgument(f"warm.pools[{i}].gpus",
                                  f"must be in [0, {MAX_POOL_GPUS}], got {warm.gpus}")


def slices_problem(product: str, slices: int) -> str | None:
    """Why ``slices`` compute slices cannot be a slice of ``product``, or None: 0 (a whole GPU)
    or a MIG instance size the product offers, where the catalog knows it."""
    if slices < 0:
        return f"must be >= 0, got {slices}"
    known = catalog.lookup(product)
    if slices == 0 or known is None:
        return None
    if not known.mig_capable:
        return f"{known.name} has no MIG: must be 0 (a whole GPU), got {slices}"
    if known.standard_profile(slices) is None:
        sizes = sorted({q.compute_slices for q in known.mig_profiles})
        return f"{known.name} has no MIG instance of {slices} compute slices (sizes: {sizes})"
    return None


def tensor_parallel_problem(gpus: int, compute_slices: int, mps_processes: int) -> str | None:
    """Why a profile point cannot be one replica of ``gpus`` GPUs, or None: at least 1, no more
    than a node holds (its GPUs are all on one node), and, above 1, whole GPUs without MPS (no
    MIG instance nor MPS share spans GPUs)."""
    if gpus < 1:
        return f"must be >= 1, got {gpus}"
    if gpus > MAX_GPUS_PER_NODE:
        return (f"must be at most {MAX_GPUS_PER_NODE}, the most GPUs a node holds (a replica's "
                f"GPUs are all on one node), got {gpus}")
    given = [f"{name} {value}" for name, value, alone in (
        ("compute_slices", compute_slices, 0), ("mps_processes", mps_processes, 1))
        if value != alone]
    if gpus > 1 and given:
        return (f"a replica of {gpus} GPUs runs on whole GPUs without MPS (compute_slices 0, "
                f"mps_processes 1), got {' and '.join(given)}")
    return None


def _check_slices(point: ProfilePoint, field: str) -> None:
    problem = slices_problem(point.product, point.compute_slices)
    if problem is not None:
        raise InvalidArgument(field, problem)


#: Replicas one RankReplicas call may rank (a serving layer's replicas of one model).
MAX_REPLICAS = 10_000


def validate_loads(loads: Sequence[ReplicaLoad], version_mismatch_factor: float,
                   model_version: str = "") -> None:
    """Raise InvalidArgument naming the field of the first bad entry (``model_version``: the
    one wanted)."""
    check_name("model_version", model_version, MAX_NAME_CHARS)
    if not loads:
        raise InvalidArgument("replicas", "must list at least one replica")
    if len(loads) > MAX_REPLICAS:
        raise InvalidArgument("replicas", f"at most {MAX_REPLICAS} per call, got {len(loads)}")
    if not (math.isfinite(version_mismatch_factor) and 0 <= version_mismatch_factor <= 1):
        raise InvalidArgument("version_mismatch_factor",
                              f"must be in [0, 1], got {version_mismatch_factor}")
    seen: set[str] = set()
    for k, load in enumerate(loads):
        where = f"replicas[{k}]"
        check_name(f"{where}.workload_id", load.workload_id, MAX_WORKLOAD_ID_CHARS)
        check_new_name(f"{where}.workload_id", load.workload_id, seen, "replica")
        check_name(f"{where}.model_version", load.model_version, MAX_NAME_CHARS)
        if load.queue_depth < 0:
            raise InvalidArgument(f"{where}.queue_depth", f"must be >= 0, got {load.queue_depth}")
        usage = load.kv_cache_usage
        if usage is not None and not (math.isfinite(usage) and 0 <= usage <= 1):
            raise InvalidArgument(f"{where}.kv_cache_usage", f"must be in [0, 1], got {usage}")
        used = load.gpu_memory_used_mib
        if used is not None and used < 0:
            raise InvalidArgument(f"{where}.gpu_memory_used_mib", f"must be >= 0, got {used}")
        if len(load.adapters) > MAX_ADAPTERS:
            raise InvalidArgument(f"{where}.adapters",
                                  f"at most {MAX_ADAPTERS}, got {len(load.adapters)}")
        for j, adapter in enumerate(load.adapters):
            if not adapter:
                raise InvalidArgument(f"{where}.adapters[{j}]", "must not be empty")
            check_name(f"{where}.adapters[{j}]", adapter, MAX_NAME_CHARS)


def validate_workload_id(field: str, workload_id: str) -> None:
    """Raise InvalidArgument naming ``field`` for an empty or malformed workload id (a
    Release's, each of a RenewLeases')."""
    if not workload_id:
        raise InvalidArgument(field, "must not be empty")
    check_name(field, workload_id, MAX_WORKLOAD_ID_CHARS)


def validate_listing(node: str, workload_prefix: str, model: str) -> None:
    """Raise InvalidArgument for a malformed ListBindings filter ("" filters nothing)."""
    check_name("node", node, MAX_NAME_CHARS)
    check_name("workload_prefix", workload_prefix, MAX_WORKLOAD_ID_CHARS)
    check_name("model", model, MAX_MODEL_CHARS)
