"""The load a model is seen to have this tick (pure): its request rate and what its queue shows
beyond it, and what its KV cache usage asks for; the demand policies' fast path and the
reactive sizing read them (``demand.demand_from``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controlplane.domain.observed import ObservedModel

if TYPE_CHECKING:
    from controlplane.domain.demand import DemandPolicy


def observed_load_rps(seen: ObservedModel, policy: DemandPolicy) -> float:
    """The load a model is seen to have: its request rate and, with ``queue_drain_s`` > 0, what
    its queue shows beyond it. The rate counts completed requests, so a saturated model's shows
    no more than its capacity (LLM engines queue the requests their batch has no room for).
    Arrivals are completions plus the queue's growth; and the queued requests are served
    within ``queue_drain_s`` at queued / ``queue_drain_s``. That backlog term grows while the
    queue does: with a drain time near the time new replicas take to serve, it matches the
    excess when they could arrive, rather than winding up to a multiple of it."""
    if policy.queue_drain_s <= 0:
        return seen.demand_rps
    growth_rps = max(0.0, seen.queue_growth_rps or 0.0)
    return seen.demand_rps + growth_rps + (seen.queued_requests or 0.0) / policy.queue_drain_s


def kv_cache_load_rps(seen: ObservedModel, policy: DemandPolicy) -> float:
    """The load that sizes the model's ready replicas so their KV cache usage falls to
    ``kv_cache_target`` (HPA's rule on a utilization: replicas x usage / target, here as the
    load those replicas serve at ``target_utilization``); 0 when the usage is not measured or
    the target is off. A model whose requests are long fills its KV cache (and then preempts
    and queues) before its request rate reaches its profile's; the load stays the same however
    many replicas share the cache, so adding them does not make it oscillate; and it is no
    burst, so the fast path does not multiply it (``demand.demand_for``'s ``steady_rps``)."""
    if policy.kv_cache_target <= 0 or seen.kv_cache_usage is None:
        return 0.0
    return (seen.capacity_rps * policy.target_utilization * seen.kv_cache_usage
            / policy.kv_cache_target)
