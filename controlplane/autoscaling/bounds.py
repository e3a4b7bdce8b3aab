"""Per-model replica bounds (the models file's ``min_replicas`` / ``max_replicas``, KEDA's
``minReplicaCount`` / ``maxReplicaCount``) and paused models, as the sizing core applies them
(pure).

Order in ``core.size``: demand -> hot replicas -> **bounds** -> warm-pool ladder (sized from
the bounded hot replicas; ``max_replicas`` also caps hot + idle, the idle rung being loaded
replicas of the model; the cached rung is free GPU share, no replica, and is not bounded) ->
GPU budgets and pools' ``max_nodes``. A budget or a pool is a hard financial / physical cap: it
wins over ``min_replicas``, and the replica target's reason then names both
(``tenant_gpu_budget:acme+min_replicas:4``). A bound that set the target adds itself to the
target's reason (``forecast_p90+min_replicas:2``, ``forecast_p90+max_replicas:40``); the
demand's own reason is left as it is (it says where the demand came from).

A paused model is held at its replicas (``domain.pause``): no bound, no ladder, and no budget
trims it, though its GPUs still count against every budget and pool (other models are trimmed
for them) and PlanFleet places them, so the node pools hold them.
"""

from __future__ import annotations

from collections.abc import Sequence

from controlplane.domain.demand import Demand
from controlplane.domain.models import ModelSpec

MIN_REPLICAS = "min_replicas"
MAX_REPLICAS = "max_replicas"


def bounded_hot(hot: int, spec: ModelSpec) -> int:
    """``hot`` within the model's [min_replicas, max_replicas] (an unset bound: none)."""
    hot = max(hot, spec.min_replicas or 0)
    return hot if spec.max_replicas is None else min(hot, spec.max_replicas)


def bounded_idle(hot: int, idle: int, spec: ModelSpec) -> int:
    """The ladder's ``idle`` replicas, so that hot + idle stays within ``max_replicas``."""
    return idle if spec.max_replicas is None else max(0, min(idle, spec.max_replicas - hot))


def bound_tag(asked: int, bounded: int, kept: int, spec: ModelSpec) -> str:
    """The bound that set a model's hot target: ``min_replicas:N`` when it raised the
    ``asked`` replicas to ``bounded`` or a budget ``kept`` fewer than N, ``max_replicas:N``
    when it lowered them; empty when neither."""
    if spec.min_replicas is not None and (bounded > asked or kept < spec.min_replicas):
        return f"{MIN_REPLICAS}:{spec.min_replicas}"
    if spec.max_replicas is not None and bounded < asked:
        return f"{MAX_REPLICAS}:{spec.max_replicas}"
    return ""


def replica_reasons(demands: Sequence[Demand], budget_cuts: Sequence[tuple[str, str]],
                    bounds: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Model -> its replica target's reason where a budget cut it or a bound set it: the cut's
    reason (else the demand's), then ``+`` the bound's tag."""
    reasons = dict(budget_cuts)
    tags = dict(bounds)
    for demand in demands:
        if demand.model in tags:
            base = reasons.get(demand.model, demand.reason)
            reasons[demand.model] = f"{base}+{tags[demand.model]}"
    return reasons

