"""Whether a pool's Karpenter NodePool launches only the pool's GPU product and shape
(REFERENCE.md §8.1). Headroom plans MIG geometries for the pool's product and sizes the pool in
``gpus_per_node`` steps; a NodePool that admits other GPUs (``instance-gpu-name In [a100]``
takes the A100-40GB as well as the A100-80GB) or other counts may launch nodes those plans do
not fit. The warm placeholders ask for no GPU (node_pools.py), so nothing else makes Karpenter
pick the pool's shape: an unpinned NodePool of any product is named every tick, and MIG
relayouts on a MIG-capable one are refused. Pure: the NodePool object in, the missing
requirements out."""

from __future__ import annotations

from typing import Any

from controlplane.adapters.k8s import names as n
from controlplane.domain.desired import PoolSpec
from scheduler.domain.catalog import PRODUCTS, lookup

NOT_PINNED = "nodepool_not_pinned"


def _family(product: str) -> str:
    return product.split("-", 1)[0].lower()


def _requirements(nodepool: dict[str, Any]) -> dict[str, list[str]]:
    """``In`` requirements of the NodePool's node template: key -> values."""
    template = ((nodepool.get("spec") or {}).get("template") or {}).get("spec") or {}
    found: dict[str, list[str]] = {}
    for requirement in template.get("requirements") or []:
        if isinstance(requirement, dict) and requirement.get("operator") == "In":
            found[str(requirement.get("key"))] = [str(v) for v in
                                                  requirement.get("values") or []]
    return found


def missing_pins(pool: PoolSpec, nodepool: dict[str, Any]) -> list[str]:
    """The requirements the NodePool lacks to launch only ``pool``'s GPUs per instance and
    product (empty when it has them, or names its instance types or families outright)."""
    catalog = lookup(pool.product)
    if catalog is None:
        return []
    have = _requirements(nodepool)
    if have.get(n.INSTANCE_TYPE_LABEL) or have.get(n.KARPENTER_INSTANCE_FAMILY):
        return []
    family = _family(catalog.name)
    wanted = [(n.KARPENTER_GPU_NAME, family),
              (n.KARPENTER_GPU_COUNT, str(pool.gpus_per_node))]
    if any(_family(p.name) == family and p.memory_mib != catalog.memory_mib for p in PRODUCTS):
        wanted.append((n.KARPENTER_GPU_MEMORY, str(catalog.memory_mib)))
    return [f"{key} In [{value}]" for key, value in wanted if have.get(key) != [value]]


def pin_problem(pool: PoolSpec, nodepool_name: str, nodepool: dict[str, Any] | None) -> str:
    """Why MIG layouts are not applied on ``pool`` ("" when its NodePool pins its GPUs, it has
    no NodePool to check, e.g. Cluster Autoscaler node groups, or its product has no MIG)."""
    catalog = lookup(pool.product)
    if nodepool is None or catalog is None or not catalog.mig_capable:
        return ""
    missing = missing_pins(pool, nodepool)
    if not missing:
        return ""
    return (f"pool {pool.name}: Karpenter NodePool {nodepool_name} may launch other GPUs than "
            f"{pool.gpus_per_node} x {catalog.name}: its requirements lack {', '.join(missing)}"
            f" (or pin {n.INSTANCE_TYPE_LABEL}); MIG relayouts on this pool are refused "
            f"({NOT_PINNED})")


def pin_note(pool: PoolSpec, nodepool_name: str, nodepool: dict[str, Any] | None) -> str:
    """What the tick's notes say of ``pool``'s NodePool: ``pin_problem`` on a MIG-capable pool;
    on any other, that it may launch other GPUs than the plan counts, a warning that refuses
    nothing; "" when it pins its GPUs or there is no NodePool (or product) to check."""
    catalog = lookup(pool.product)
    if nodepool is None or catalog is None:
        return ""
    if catalog.mig_capable:
        return pin_problem(pool, nodepool_name, nodepool)
    missing = missing_pins(pool, nodepool)
    if not missing:
        return ""
    return (f"pool {pool.name}: Karpenter NodePool {nodepool_name} may launch other GPUs than "
            f"{pool.gpus_per_node} x {catalog.name}: its requirements lack {', '.join(missing)}"
            f" (or pin {n.INSTANCE_TYPE_LABEL}); its warm placeholders ask for no GPU, so the "
            f"nodes they hold may not be what the plan counts ({NOT_PINNED})")
