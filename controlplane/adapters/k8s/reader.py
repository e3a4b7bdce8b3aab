"""K8sClusterReader: the cluster as the same ObservedState the simulator produces."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime

from controlplane.adapters.k8s import names as n
from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.inventory import (
    Inventory,
    NodeInfo,
    PodInfo,
    WorkloadInfo,
    fetch_inventory,
    offered_mig,
)
from controlplane.adapters.k8s.nodepool_pins import pin_note
from controlplane.adapters.k8s.pool_targets import (
    orphaned_placeholders,
    pool_drift,
    target_nodes,
    target_record,
)
from controlplane.adapters.k8s.quantity import cpu_milli, memory_mib
from controlplane.domain.desired import PoolSpec
from controlplane.domain.models import SharingMode
from controlplane.domain.observed import (
    ModelLoad,
    ObservedGpu,
    ObservedModel,
    ObservedNode,
    ObservedPool,
    ObservedState,
    ServingWorkload,
)
from controlplane.domain.relayout_gpu_pods import UndrainedPod, gpu_pods_in_the_way
from controlplane.domain.sharing_config import layout_from_config_name, mode_from_strategy
from controlplane.ports import Clock, LoadSource
from controlplane.settings import KubernetesSettings
from scheduler.domain.cluster import product_key


def holds_gpus(pod: PodInfo) -> bool:
    """A workload pod a drain would evict from its GPUs (warm-pool placeholders, which only
    hold capacity, DaemonSet and static pods, and finished pods do not count)."""
    return (bool(pod.gpu_requests) and not pod.daemon and not pod.mirror
            and n.WARM_POOL_LABEL not in pod.labels and pod.phase not in ("Succeeded", "Failed"))


def pods_drain_leaves(inventory: Inventory, node: str) -> tuple[UndrainedPod, ...]:
    """The pods on ``node`` a drain leaves: DaemonSet and static (mirror) pods."""
    return tuple(UndrainedPod(p.namespace, p.name, p.phase, tuple(sorted(p.gpu_requests.items())))
                 for p in inventory.pods_on(node) if p.daemon or p.mirror)


def observed_node(node: NodeInfo, inventory: Inventory, operator_namespace: str) -> ObservedNode:
    """The node as the planner sees it; ``operator_namespace`` (``k8s.gpu_operator_namespace``)
    holds the GPU Operator's pods, the only GPU pods a drain leaves that a re-layout may run
    under."""
    layout = inventory.layout_of(node)
    # Headroom's device-plugin config names the mode and clients per GPU (the plugin applies it
    # live); a node on another config: the plugin's own labels
    # a config the device-plugin ConfigMap no longer holds is not in force (the plugin ignores
    # the name): the plugin's own labels, as for another config
    config = (None if inventory.lost_sharing_config(node) else
              layout_from_config_name(node.labels.get(n.DEVICE_PLUGIN_CONFIG, "")))
    replicas = node.labels.get(n.GPU_REPLICAS, "1")
    strategy_mode = (config.mode if config is not None else
                     mode_from_strategy(node.labels.get(n.SHARING_STRATEGY, "none")))
    clients = config.replicas if config is not None else int(replicas) if replicas.isdigit() else 1
    # the MIG manager failed to apply the config, or the device plugin offers MIG instances
    # that no known config accounts for: the instances are unknown, so the GPUs count as MIG on
    # with none (nothing is placed on slices the device plugin may not offer)
    unknown = (bool(node.mig_config) and node.mig_state == "failed") or (
        layout is None and bool(offered_mig(node)))
    gpus = []
    for index in range(node.gpu_count):
        profiles = layout.profiles_of(index) if layout is not None and not unknown else ()
        mig_on = unknown or (layout is not None and layout.mig_enabled_on(index))
        sharing = SharingMode.MIG if mig_on else strategy_mode
        gpus.append(ObservedGpu(index, node.product, node.gpu_memory_mib, node.mig_capable,
                                profiles, sharing.value, 1 if mig_on else clients, mig_on))
    kept = tuple(sorted((k, v) for k, v in node.labels.items()
                        if k.startswith(n.KEPT_LABEL_PREFIXES)))
    holding = [p for p in inventory.pods_on(node.name) if holds_gpus(p)]
    units = sum(p.gpu_requests.get(n.GPU_RESOURCE, 0) for p in holding)
    whole = sum(1 for g in gpus if not g.mig_enabled)
    return ObservedNode(node.name, node.pool, node.product, node.ready,
                        cpu_milli(node.allocatable.get("cpu", 0)),
                        memory_mib(node.allocatable.get("memory", 0)), tuple(gpus),
                        node.unschedulable, kept, len(holding), min(units, whole),
                        gpu_pods_in_the_way(pods_drain_leaves(inventory, node.name),
                                            operator_namespace))


def unmanaged_note(workloads: Sequence[WorkloadInfo], model_label: str) -> str:
    """One line naming the workloads labelled with a model the models table does not list
    (removed from it, or never imported), by model."""
    by_model: dict[str, list[str]] = {}
    for w in workloads:
        by_model.setdefault(w.model, []).append(f"{w.kind} {w.namespace}/{w.name}")
    named = ", ".join(f"{model} ({', '.join(sorted(served))})"
                      for model, served in sorted(by_model.items()))
    return (f"unmanaged: {named}: labelled {model_label}, not in the models table; Headroom "
            "neither measures, sizes nor scales them (`headroom models import` to manage one, "
            "or remove the label)")


def _named(nodes: Sequence[NodeInfo]) -> str:
    """``node(s) a, b`` (the first three, then how many more)."""
    names = sorted(node.name for node in nodes)
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"node(s) {', '.join(names[:3])}{more}"


def pool_node_mismatches(pool: PoolSpec, nodes: Sequence[NodeInfo]) -> list[str]:
    """What the pool's registered GPU ``nodes`` report (GPU Feature Discovery's labels) against
    its settings, one line each: another GPU product than its ``product`` (the plan lays out,
    sizes and prices GPUs of the configured product, and places on them models profiled there)
    and another GPU count than its ``gpus_per_node`` (the plan sizes the pool in steps of it;
    the pool bills what the nodes report: ``ObservedPool.gpus_billed``)."""
    found = []
    by_label: dict[tuple[str, str], list[NodeInfo]] = {}
    for node in nodes:
        if node.product and product_key(node.product) != product_key(pool.product):
            by_label.setdefault((node.labels.get(n.GPU_PRODUCT, ""), node.product),
                                []).append(node)
    for (label, product), mine in sorted(by_label.items()):
        found.append(f"pool {pool.name}: configured with product {pool.product}, but its "
                     f"{_named(mine)} report {n.GPU_PRODUCT}={label} ({product}): the plan "
                     f"places, lays out and prices {pool.product} GPUs there; set the pool's "
                     "product to its nodes' (or fix the pool's node selection)")
    by_count: dict[int, list[NodeInfo]] = {}
    for node in nodes:
        if node.product and node.gpu_count != pool.gpus_per_node:
            by_count.setdefault(node.gpu_count, []).append(node)
    for gpus, mine in sorted(by_count.items()):
        found.append(f"pool {pool.name}: configured with gpus_per_node {pool.gpus_per_node}, "
                     f"but its {_named(mine)} report {n.GPU_COUNT}={gpus}: the plan sizes the "
                     f"pool in steps of {pool.gpus_per_node} GPUs, while the cloud bills the "
                     f"{gpus} GPUs of each such node (as Headroom's cost figures count them); "
                     "set gpus_per_node to its nodes' (or pin the NodePool's GPU count)")
    return found


def pools_node_mismatches(inventory: Inventory, pools: Sequence[PoolSpec]) -> list[str]:
    """``pool_node_mismatches`` of every pool, from its registered nodes in ``inventory``."""
    return [line for pool in pools for line in pool_node_mismatches(
        pool, [node for node in inventory.nodes if node.pool == pool.name])]


def _reading(model: str, name: str, value: float | None, notes: list[str],
             most: float = math.inf, least: float = 0.0) -> float | None:
    """A reading of the load source beside the rate (latency, queue, KV cache), or None (noted)
    when it is below ``least``, not finite or above ``most``."""
    if value is not None and not (math.isfinite(value) and least <= value <= most):
        notes.append(f"{model}: the load source gave {name}={value}; not measured")
        return None
    return value


def observed_from(inventory: Inventory, pools: Sequence[PoolSpec], settings: KubernetesSettings,
                  load: LoadSource | None, now: datetime,
                  max_sample_age_s: float | None = None,
                  managed: Collection[str] | None = None) -> ObservedState:
    """``managed``: the models the models table lists; a workload labelled with another is
    left out (its load is not read) and named in one note. None: every labelled model."""
    notes = list(inventory.notes)
    nodes = []
    for node in inventory.nodes:
        if not node.product:
            if node.pool:  # a pool's node, not a CPU node: say why its GPUs are not counted
                notes.append(f"node {node.name}: in pool {node.pool} but has no "
                             f"{n.GPU_PRODUCT} label (is GPU Feature Discovery running on "
                             "it?); left out of the fleet")
            continue
        if not node.pool:
            notes.append(f"node {node.name}: no configured pool for GPU product {node.product}")
            continue
        nodes.append(observed_node(node, inventory, settings.gpu_operator_namespace))
        lost = inventory.lost_sharing_config(node)
        if lost:
            notes.append(f"node {node.name}: selects {n.DEVICE_PLUGIN_CONFIG}={lost}, which "
                         f"ConfigMap {settings.gpu_operator_namespace}/"
                         f"{settings.device_plugin_config_map} does not hold (deleted or edited "
                         "outside Headroom): the device plugin ignores it; its sharing is read "
                         "from the plugin's labels until Headroom writes the config again")
        if node.mig_config and node.mig_state not in ("", "success"):
            notes.append(f"node {node.name}: mig.config={node.mig_config} "
                         f"state={node.mig_state}")
    notes.extend(pools_node_mismatches(inventory, pools))
    observed_pools = []
    for pool in pools:
        mine = [node for node in nodes if node.pool == pool.name]
        ready = sum(1 for node in mine if node.ready)
        nodepool_name = settings.nodepool_names.get(pool.name, pool.name)
        nodepool = inventory.nodepools.get(nodepool_name)
        drift = pool_drift(pool, nodepool, inventory.placeholders.get(pool.name), settings)
        if drift:
            notes.append(drift)
        unpinned = pin_note(pool, nodepool_name, nodepool)
        if unpinned:
            notes.append(unpinned)
        observed_pools.append(ObservedPool(pool.name, pool.product, pool.gpus_per_node, ready,
                                           len(mine) - ready,
                                           target_nodes(pool, target_record(
                                               inventory, settings, pool), len(mine)),
                                           target_intact=not drift,
                                           gpus_ready_reported=sum(
                                               len(node.gpus) for node in mine if node.ready),
                                           gpus_pending_reported=sum(
                                               len(node.gpus) for node in mine
                                               if not node.ready)))
    notes.extend(orphaned_placeholders(inventory, {pool.name for pool in pools}))
    by_model: dict[str, list[int]] = {}
    served_by: dict[str, list[WorkloadInfo]] = {}
    labelled = [w for w in inventory.workloads if w.model]
    unmanaged = [w for w in labelled if managed is not None and w.model not in managed]
    if unmanaged:
        notes.append(unmanaged_note(unmanaged, settings.model_label))
    for workload in labelled:
        if managed is None or workload.model in managed:
            totals = by_model.setdefault(workload.model, [0, 0])
            totals[0] += workload.replicas
            totals[1] += workload.ready
            served_by.setdefault(workload.model, []).append(workload)
    loads = (load.measure({m: ready for m, (_, ready) in by_model.items()}, now)
             if load is not None else None)
    models = []
    sampled: list[datetime] = []  # when the newest sample behind each measured rate was taken
    undated: dict[str, list[str]] = {}  # why a source cannot date rates -> the models measured
    for model, (target, ready) in sorted(by_model.items()):
        if loads is None:  # no load source: every model 0, as before metrics were wired
            models.append(ObservedModel(model, ready, max(0, target - ready), target, 0.0, 0.0))
            continue
        got = loads.get(model, ModelLoad(None, 0.0, "the load source returned nothing"))
        demand_rps, capacity_rps = got.demand_rps, got.capacity_rps
        if not math.isfinite(capacity_rps):
            notes.append(f"{model}: the load source gave capacity_rps={capacity_rps}; not "
                         "finite, taken as 0")
            capacity_rps = 0.0
        why = got.why or f"the load source gave demand_rps={demand_rps}; not finite"
        measured = demand_rps is not None and math.isfinite(demand_rps)
        age_s = (now - got.sampled_at).total_seconds() if got.sampled_at else None
        if measured and age_s is not None and max_sample_age_s is not None \
                and age_s > max_sample_age_s:
            # a rate over a window the scrapes stopped in: not this minute's load (this model
            # only; the others' fresh rates still decide the tick)
            measured, why = False, (f"its newest sample is {age_s:.0f}s old (over "
                                    f"{max_sample_age_s:.0f}s: has Prometheus stopped scraping "
                                    "it?)")
        if measured and got.sampled_at is not None:
            sampled.append(got.sampled_at)
        if measured and got.undated_why:
            undated.setdefault(got.undated_why, []).append(model)
        if not measured:
            # unknown, not 0: a 0 would be stored as history and size the model for no load
            notes.append(f"{model}: demand not measured this tick: {why}")
        latency_ms, queued = (_reading(model, name, value, notes) for name, value in (
            ("latency_ms", got.latency_ms), ("queued_requests", got.queued_requests)))
        # negative while the queue drains
        growth = _reading(model, "queue_growth_rps", got.queue_growth_rps, notes,
                          least=-math.inf)
        kv_cache = _reading(model, "kv_cache_usage", got.kv_cache_usage, notes, most=1.0)
        models.append(ObservedModel(model, ready, max(0, target - ready), target,
                                    demand_rps if demand_rps is not None and measured else 0.0,
                                    capacity_rps, demand_measured=measured,
                                    latency_ms=latency_ms, queued_requests=queued,
                                    queue_growth_rps=growth, kv_cache_usage=kv_cache))
    models = [_with_workloads(m, served_by.get(m.name, []), inventory.pods) for m in models]
    notes += [f"{len(names)} model(s) ({', '.join(names)}): {why}: reconcile.max_staleness_s "
              "is not checked for their rates" for why, names in undated.items()]
    if load is None and models:
        notes.append("no load source: demand_rps and capacity_rps are 0")
    # the inventory is listed now; the rates are as old as their samples (a scrape that stopped
    # leaves a rate over a long window): the snapshot is as old as its oldest rate
    data_at = min(sampled, default=None)
    return ObservedState(now, tuple(observed_pools), tuple(nodes), tuple(models),
                         notes=tuple(notes),
                         data_at=data_at if data_at and data_at <= now else None)


def _with_workloads(model: ObservedModel, workloads: list[WorkloadInfo],
                    pods: Sequence[PodInfo]) -> ObservedModel:
    """The model with the workloads labelled with it and what each one's pods ask for, by name
    (the replica actuator refuses to pick one of several and says so; their slices are still
    checked), and how many of their pods no node has bound."""
    return replace(model, workloads=tuple(sorted(
        (ServingWorkload(f"{w.kind} {w.namespace}/{w.name}", w.gpu_requests, w.stop_grace_s,
                         w.pre_stop) for w in workloads),
        key=lambda served: served.name)), replicas_unscheduled=sum(
        1 for pod in pods if not pod.node and pod.phase == "Pending"
        and any(w.selects_info(pod) for w in workloads)))


class K8sClusterReader:
    """The fleet listed from the API server, each model's load from ``load``; a rate whose
    newest sample is over ``max_sample_age_s`` old (``reconcile.max_staleness_s``) is not
    measured this tick. ``models`` gives the models the models table lists at each snapshot
    (``serve``'s models in use, reloaded without a restart): a workload labelled with another
    is not one of the snapshot's models (``observed_from``); None: every labelled model."""

    def __init__(self, api: KubeApi, settings: KubernetesSettings, pools: Sequence[PoolSpec],
                 clock: Clock, load: LoadSource | None = None,
                 max_sample_age_s: float | None = None, *,
                 models: Callable[[], Collection[str]] | None = None) -> None:
        self.api = api
        self.settings = settings
        self.pools = tuple(pools)
        self.clock = clock
        self.load = load
        self.max_sample_age_s = max_sample_age_s
        self.models = models

    def inventory(self) -> Inventory:
        return fetch_inventory(self.api, self.settings, self.pools)

    def without_load(self) -> K8sClusterReader:
        """This reader with no load source: a follower keeps the placement inventory fresh
        and needs no request rates, so it does not query Prometheus every tick."""
        return K8sClusterReader(self.api, self.settings, self.pools, self.clock,
                                models=self.models)

    def snapshot(self) -> ObservedState:
        """Raises TransientError when the API server cannot be reached, PermanentError when it
        refuses a read (e.g. 403: the service account lacks RBAC)."""
        managed = None if self.models is None else frozenset(self.models())
        return observed_from(self.inventory(), self.pools, self.settings, self.load,
                             self.clock.now(), self.max_sample_age_s, managed)
