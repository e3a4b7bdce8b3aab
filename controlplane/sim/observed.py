"""What the simulated fleet shows its reader (``SimCluster.snapshot``): its pools, nodes (GPUs,
MIG layout, sharing, the GPU pods bound there) and models (demand, the replicas' true capacity
and latency); and, to resume from a stored snapshot, the layouts its nodes had and the end of
the re-layouts it left active."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from controlplane.domain.desired import PoolSpec
from controlplane.domain.mig_relayout import RelayoutPhase
from controlplane.domain.models import ModelSpec
from controlplane.domain.node_configs import mig_layout_of, node_kind
from controlplane.domain.observed import (
    ObservedGpu,
    ObservedModel,
    ObservedNode,
    ObservedPool,
    ObservedState,
)
from controlplane.ports import RelayoutStore
from controlplane.sim.latency import mean_latency_ms, true_capacity_rps
from controlplane.sim.nodes import GPU_FACTS, SimNode, SimReplica, bound_to, whole_gpus_held


def observed_pools(pools: Mapping[str, PoolSpec], nodes: Sequence[SimNode],
                   targets: Mapping[str, int], now: datetime) -> tuple[ObservedPool, ...]:
    """Each pool's nodes as the Kubernetes reader counts them: every node of the pool until it
    is deleted, one leaving it (drained before deletion, cordoned, still billed) included."""
    out = []
    for pool in pools.values():
        mine = [n for n in nodes if n.pool == pool.name]
        ready = sum(1 for n in mine if n.ready_at <= now)
        out.append(ObservedPool(pool.name, pool.product, pool.gpus_per_node, ready,
                                len(mine) - ready, targets[pool.name]))
    return tuple(out)


def observed_nodes(pools: Mapping[str, PoolSpec], nodes: Sequence[SimNode],
                   specs: Mapping[str, ModelSpec],
                   replicas: Mapping[str, Sequence[SimReplica]],
                   now: datetime) -> tuple[ObservedNode, ...]:
    out = []
    for node in nodes:
        pool = pools[node.pool]
        memory_mib, mig = GPU_FACTS.get(pool.product, (0, False))
        gpus = tuple(ObservedGpu(i, pool.product, memory_mib, mig, node.profiles(i),
                                 "mig" if node.profiles(i) else node.sharing.mode.value,
                                 node.sharing.replicas)
                     for i in range(pool.gpus_per_node))
        on = bound_to(replicas, node.name)
        # replicas off MIG fill whole GPUs by their shares (the simulator packs a node's
        # GPUs as one pool of capacity), a replica of N GPUs N whole ones
        points = [specs[m].best_point() for m, _ in on]
        held = whole_gpus_held(p for p in points if not p.compute_slices)
        whole = sum(1 for g in gpus if not g.mig_enabled)
        out.append(ObservedNode(node.name, node.pool, pool.product, node.ready_at <= now,
                                pool.gpus_per_node * 16_000, pool.gpus_per_node * 120_000,
                                gpus, cordoned=node.leaving or bool(node.relayout
                                                                    and node.relayout.cordoned),
                                gpu_pods=len(on),
                                whole_gpus_in_use=min(whole, held)))
    return tuple(out)


def observed_models(replicas: Mapping[str, Sequence[SimReplica]],
                    specs: Mapping[str, ModelSpec], true_factor: Mapping[str, float],
                    demand_rps: Callable[[str, datetime], float],
                    now: datetime) -> tuple[ObservedModel, ...]:
    """Demand, the TRUE capacity of the ready replicas (what they serve within the SLO,
    ``sim.true_throughput_factor`` x the profile) and their mean latency (``sim.latency``)."""
    out = []
    for model, mine in replicas.items():
        ready = sum(1 for r in mine if r.ready_at is not None and r.ready_at <= now)
        spec, factor = specs[model], true_factor.get(model, 1.0)
        rate_rps = demand_rps(model, now)
        out.append(ObservedModel(model, ready, len(mine) - ready, len(mine),
                                 rate_rps, ready * true_capacity_rps(spec, factor),
                                 latency_ms=mean_latency_ms(spec, factor, rate_rps, ready),
                                 replicas_unscheduled=sum(1 for r in mine if r.node is None)))
    return tuple(out)


def end_stored_relayouts(relayouts: RelayoutStore, now: datetime) -> None:
    """The re-layouts the stopped run left active end aborted: the resumed fleet's nodes
    are new, with the layouts the stored snapshot shows."""
    for r in relayouts.active_relayouts():
        relayouts.save_relayout(replace(
            r, phase=RelayoutPhase.ABORTED, updated_at=now, deadline_at=None,
            wait_reason="", alert=f"node_gone: the simulated fleet resumed on new nodes, laid "
                                  f"out as last observed; the re-layout of {r.node} did "
                                  "not carry over"))


def restore_layouts(pools: Mapping[str, PoolSpec], nodes: Sequence[SimNode],
                    observed: ObservedState) -> None:
    """The stored nodes' layouts, pool by pool in name order (the names are new)."""
    for pool in pools.values():
        stored = sorted((n for n in observed.nodes if n.pool == pool.name),
                        key=lambda n: n.name)
        mine = [n for n in nodes if n.pool == pool.name]
        for node, seen in zip(mine, stored, strict=False):
            profiles = [tuple(g.mig_layout) for g in seen.gpus]
            node.mig = (mig_layout_of(pool.product, profiles) if any(profiles) else None)
            kind = node_kind(seen)
            node.sharing = kind.sharing if not kind.mig else node.sharing
