"""The size Headroom committed to a pool, as the cluster records it, and what no longer holds it.

Under Karpenter a pool's target is annotated on its NodePool (whose node limit backs it up);
under Cluster Autoscaler on its placeholder Deployment (``node_pools.py``). ``target_record`` and
``target_nodes`` read the target (for the reader's ``ObservedPool.target_nodes`` and the MIG
re-layout's ``RelayoutView``), ``pool_drift`` notes what was changed outside Headroom, and
``orphaned_placeholders`` notes the placeholder Deployments of pools no longer configured.
"""

from __future__ import annotations

from typing import Any

from controlplane.adapters.k8s import names as n
from controlplane.adapters.k8s.drift import placeholder_drift
from controlplane.adapters.k8s.inventory import Inventory
from controlplane.adapters.k8s.node_pools import pool_placeholders
from controlplane.adapters.k8s.quantity import count
from controlplane.domain.desired import PoolSpec
from controlplane.settings import KubernetesSettings


def _annotated_target(nodepool: dict[str, object]) -> int | None:
    """The size Headroom last committed to the NodePool (its target-nodes annotation)."""
    meta = nodepool.get("metadata")
    annotations = (meta.get("annotations") if isinstance(meta, dict) else None) or {}
    target = annotations.get(n.TARGET_NODES_ANNOTATION, "")
    return int(target) if isinstance(target, str) and target.isdigit() else None


def _nodes_limit(nodepool: dict[str, object]) -> object:
    """The NodePool's node-count limit (``spec.limits.nodes``), as written."""
    spec = nodepool.get("spec")
    limits = (spec.get("limits") if isinstance(spec, dict) else None) or {}
    return limits.get(n.KARPENTER_NODES_LIMIT)


def target_record(inventory: Inventory, settings: KubernetesSettings,
                  pool: PoolSpec) -> dict[str, Any] | None:
    """The object that records the size Headroom committed to ``pool``: its Karpenter
    NodePool, or under Cluster Autoscaler its placeholder Deployment (node_pools.py)."""
    if settings.uses_nodepools:
        return inventory.nodepools.get(settings.nodepool_names.get(pool.name, pool.name))
    return inventory.placeholders.get(pool.name)


def target_nodes(pool: PoolSpec, nodepool: dict[str, object] | None, registered: int) -> int:
    """The pool's target from ``nodepool``, the object ``target_record`` names (a placeholder
    Deployment has no node limit to fall back on); ``registered`` where none records one."""
    if not nodepool:
        return registered
    annotated = _annotated_target(nodepool)
    if annotated is not None:
        return annotated
    limit = _nodes_limit(nodepool)
    if limit is not None:
        return count(limit)
    return registered


def _placeholder_changes(pool: PoolSpec, placeholders: dict[str, Any] | None, target: int,
                         settings: KubernetesSettings) -> list[str]:
    if placeholders is None:
        return [f"placeholder Deployment {n.placeholder_name(pool.name)} missing"]
    changed = []
    replicas = (placeholders.get("spec") or {}).get("replicas", 1)
    if replicas != target:
        changed.append(f"placeholder Deployment holds {replicas} nodes")
    changed.extend(placeholder_drift(pool_placeholders(pool, settings, target), placeholders))
    return changed


def pool_drift(pool: PoolSpec, nodepool: dict[str, object] | None,
               placeholders: dict[str, Any] | None, settings: KubernetesSettings) -> str:
    """What no longer holds the size Headroom committed to the pool (the placeholder
    Deployment: its replicas, the GPUs its pods ask for and the nodes they may run on; under
    Karpenter the NodePool's node limit), e.g. deleted or edited by someone else; "" when all
    hold it, or Headroom has not sized the pool. Under Cluster Autoscaler the target is the
    one annotated on the placeholder Deployment itself."""
    record = nodepool if settings.uses_nodepools else placeholders
    target = _annotated_target(record) if record else None
    if record is None or target is None:
        return ""
    changed = _placeholder_changes(pool, placeholders, target, settings)
    if nodepool is not None and settings.uses_nodepools:
        limit = _nodes_limit(nodepool)
        try:
            limited = count(limit) if limit is not None else None
        except ValueError:
            limited = None
        if limited != target:
            changed.append(f"NodePool {n.KARPENTER_NODES_LIMIT} limit {limit or 'unset'}, "
                           f"not {target}")
    if not changed:
        return ""
    return (f"pool {pool.name}: {'; '.join(changed)} for its target of {target} nodes "
            "(changed outside Headroom); writing the target again")


def orphaned_placeholders(inventory: Inventory, configured: set[str]) -> list[str]:
    """Placeholder Deployments of pools no longer configured (removed or renamed): nothing
    resizes them, so their pods would hold their nodes, and their cost, for good. Named, not
    touched: the operator may be moving the pool."""
    notes = []
    for pool, deployment in sorted(inventory.placeholders.items()):
        replicas = (deployment.get("spec") or {}).get("replicas", 1)
        if pool in configured or not replicas:
            continue
        meta = deployment.get("metadata") or {}
        notes.append(f"placeholder Deployment {meta.get('namespace')}/{meta.get('name')} holds "
                     f"{replicas} nodes for pool {pool}, which is not configured: nothing "
                     "resizes it now; scale it to 0 or delete it to let the nodes go")
    return notes
