"""When the dashboard reads a model as short of its SLO (pure): ready capacity below demand, a
queue backlog or a full KV cache, with the thresholds the alerts use; the Overview's status and
short %, and the lines of the Models page's serving signals."""

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
               kv_cache_usage: float = math.nan) -> str:
    """A model's SLO status: short when ready capacity is below demand, its queue holds over
    ``QUEUE_BACKLOG_S`` of that capacity or its KV cache is over ``KV_CACHE_FULL``, ok when
    not, unknown when demand or capacity is not a number (a NaN in the store compares false
    both ways: it read as ok)."""
    if not (math.isfinite(demand_rps) and math.isfinite(capacity_rps)):
        return "unknown"
    backlog = math.isfinite(queued) and queued > QUEUE_BACKLOG_S * capacity_rps
    full = math.isfinite(kv_cache_usage) and kv_cache_usage > KV_CACHE_FULL
    return "short" if capacity_rps < demand_rps or backlog or full else "ok"
