"""When the dashboard reads a model as short of its SLO (pure): ready capacity below demand, a
queue backlog, a full KV cache or a latency above the models file's SLO, with the thresholds the
alerts use; the Overview's status and short %, and the lines of the Models page's serving
signals."""

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


def slo_status(demand_rps: float, capacity_rps: float, queued: float = math.nan,
               kv_cache_usage: float = math.nan, latency_ms: float = math.nan,
               latency_slo_ms: float = math.nan) -> str:
    """A model's SLO status: short when ready capacity is below demand, its queue holds over
    ``QUEUE_BACKLOG_S`` of that capacity, its KV cache is over ``KV_CACHE_FULL`` or its latency
    is above its SLO (the alert HeadroomModelOverLatencySlo's rule, at once), ok when not,
    unknown when demand or capacity is not a number (a NaN in the store compares false both
    ways: it read as ok). A signal not read (NaN) is not short."""
    if not (math.isfinite(demand_rps) and math.isfinite(capacity_rps)):
        return "unknown"
    backlog = math.isfinite(queued) and queued > QUEUE_BACKLOG_S * capacity_rps
    full = math.isfinite(kv_cache_usage) and kv_cache_usage > KV_CACHE_FULL
    slow = math.isfinite(latency_ms) and math.isfinite(latency_slo_ms) and (
        latency_ms > latency_slo_ms)
    return "short" if capacity_rps < demand_rps or backlog or full or slow else "ok"
