"""When a model is short of its SLO now (pure), with the thresholds the alerts use: its ready
capacity below its demand, a queue backlog, a full KV cache or a latency above the models
file's SLO. The dashboard's Overview (status and short %), its Models page's serving signals and
``headroom status --json`` read it."""

from __future__ import annotations

import math

#: a queue holding more than this many seconds of a model's ready capacity is short (the alert
#: HeadroomModelQueueBacklog's threshold): a saturated model completes only what it serves, so
#: its demand never shows above its capacity
QUEUE_BACKLOG_S = 30.0
#: a KV cache fuller than this is short (the alert HeadroomModelKvCacheFull's threshold): vLLM
#: preempts (SGLang retracts) running requests and queues new ones before the request rate nears
#: capacity
KV_CACHE_FULL = 0.95


def slo_shortfalls(demand_rps: float, capacity_rps: float, queued: float = math.nan,
                   kv_cache_usage: float = math.nan, latency_ms: float = math.nan,
                   latency_slo_ms: float = math.nan) -> tuple[str, ...]:
    """Why a model is short of its SLO: ``capacity`` (ready capacity below demand), ``queue``
    (over ``QUEUE_BACKLOG_S`` of that capacity waiting), ``kv_cache`` (over ``KV_CACHE_FULL``)
    and ``latency`` (above its SLO: HeadroomModelOverLatencySlo's rule, at once); none when
    it is not. A signal not read (NaN) is not short."""
    def above(value: float, limit: float) -> bool:
        return math.isfinite(value) and math.isfinite(limit) and value > limit

    return tuple(reason for reason, short in (
        ("capacity", above(demand_rps, capacity_rps)),
        ("queue", above(queued, QUEUE_BACKLOG_S * capacity_rps)),
        ("kv_cache", above(kv_cache_usage, KV_CACHE_FULL)),
        ("latency", above(latency_ms, latency_slo_ms))) if short)


def slo_status(demand_rps: float, capacity_rps: float, queued: float = math.nan,
               kv_cache_usage: float = math.nan, latency_ms: float = math.nan,
               latency_slo_ms: float = math.nan) -> str:
    """``short`` when ``slo_shortfalls`` names a reason; else ``ok``, or ``unknown`` when
    demand or capacity is not a number (a NaN in the store compares false both ways: it would
    read as ok)."""
    if slo_shortfalls(demand_rps, capacity_rps, queued, kv_cache_usage, latency_ms,
                      latency_slo_ms):
        return "short"
    return "ok" if math.isfinite(demand_rps) and math.isfinite(capacity_rps) else "unknown"
