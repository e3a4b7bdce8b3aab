"""How a simulated replica's latency grows with its load: an M/M/1-like queue.

A model's profile point says one replica serves ``replica_rps`` within its latency SLO (its
segment's ``throughput_rps`` over the segment's replicas: one per MPS process on a whole GPU) at
an unloaded latency of ``latency_ms``. Its replicas really serve ``true_throughput_factor`` x
that (the simulator's ``sim.true_throughput_factor``; 1.0 = the profile is right). The mean
latency at a load of ``demand_rps`` on ``ready`` replicas is

    latency_ms / max(1 - demand_rps / (ready x saturation_rps), 0.05)

with ``saturation_rps = true capacity / (1 - latency_ms / latency_slo_ms)``: the rate a replica
would serve with an unbounded queue, chosen so that the latency reaches the SLO exactly at the
true capacity (the profile's meaning of throughput). Past saturation the latency stays at
20 x ``latency_ms`` (the floor of 0.05: a full queue that sheds load, not an infinite wait).
"""

from __future__ import annotations

from controlplane.domain.models import ModelSpec

MIN_IDLE_SHARE = 0.05


def true_capacity_rps(spec: ModelSpec, factor: float) -> float:
    """What one replica really serves within the SLO (its share of its segment's throughput)."""
    return spec.best_point().replica_rps * factor


def mean_latency_ms(spec: ModelSpec, factor: float, demand_rps: float, ready: int) -> float | None:
    """The mean latency of ``ready`` replicas at ``demand_rps``; None with no replica ready."""
    point = spec.best_point()
    return queue_latency_ms(point.latency_ms, spec.latency_slo_ms,
                            true_capacity_rps(spec, factor), demand_rps, ready)


def queue_latency_ms(latency_ms: float, latency_slo_ms: float, true_per_replica_rps: float,
                     demand_rps: float, ready: int) -> float | None:
    """The formula above on plain numbers (``headroom simulate`` has no ModelSpec profile
    latency): unloaded ``latency_ms``, the SLO reached at ``true_per_replica_rps``."""
    if ready <= 0:
        return None
    headroom = max(1.0 - latency_ms / latency_slo_ms, MIN_IDLE_SHARE)
    saturation_rps = true_per_replica_rps / headroom
    utilization = max(0.0, demand_rps) / (ready * saturation_rps)
    return latency_ms / max(1.0 - utilization, MIN_IDLE_SHARE)
