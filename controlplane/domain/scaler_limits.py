"""What a model's replica bounds and pause make of KEDA's metric and activity (pure).

KEDA's HPA asks for ``ceil(metric / target)`` replicas, counting both in whole thousandths
(``int64(v * 1000)``, KEDA's pkg/scalers/scaler.go): the external scaler honours the models
file's ``min_replicas`` / ``max_replicas`` and ``headroom models pause`` by serving a metric for
which that count lies within the bounds, or equals the replicas a pause holds. A pause wins over
the bounds (as in the reconcile loop: ``autoscaling.bounds``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: KEDA counts ``targetSizeFloat`` and ``metricValueFloat`` in thousandths
MILLI = 1000
#: ulps a metric is nudged by, at most, to land on the count asked for
NUDGES = 64


@dataclass(frozen=True, slots=True)
class ReplicaLimits:
    """A model's replica bounds (None: unset) and the replicas a pause holds (None: not
    paused)."""

    min_replicas: int | None = None
    max_replicas: int | None = None
    held: int | None = None

    def __post_init__(self) -> None:
        if self.min_replicas is not None and self.min_replicas < 0:
            raise ValueError(f"min_replicas must be >= 0, got {self.min_replicas}")
        if self.max_replicas is not None and self.max_replicas < max(1, self.min_replicas or 0):
            raise ValueError(f"max_replicas must be >= 1 and >= min_replicas, got "
                             f"{self.max_replicas}")
        if self.held is not None and self.held < 0:
            raise ValueError(f"held replicas must be >= 0, got {self.held}")


def keda_replicas(metric: float, target: float) -> int:
    """``ceil(metric / target)`` as KEDA's HPA counts it: both truncated to whole thousandths
    (``target`` at least 0.001)."""
    target_milli = int(target * MILLI)
    if target_milli <= 0:
        raise ValueError(f"target must be at least 0.001, got {target}")
    return -(-int(metric * MILLI) // target_milli)


def replicas_metric(replicas: int, target: float) -> float:
    """A metric for which KEDA asks exactly ``replicas``: ``replicas x target``, nudged by a few
    ulps where float rounding would make it one more (or one fewer). Where the target's
    thousandths do not hold ``replicas`` (a target under ``replicas`` thousandths, or one KEDA
    truncates), KEDA's own count is the one kept: it is KEDA that scales."""
    if replicas <= 0:
        return 0.0
    value = replicas * target
    for _ in range(NUDGES):
        counted = (keda_replicas(value, target), math.ceil(value / target))
        if counted == (replicas, replicas):
            return value
        value = math.nextafter(value, 0.0 if max(counted) > replicas else math.inf)
    value = replicas * int(target * MILLI) / MILLI
    for _ in range(NUDGES):
        count = keda_replicas(value, target)
        if count == replicas:
            return value
        value = math.nextafter(value, 0.0 if count > replicas else math.inf)
    raise ArithmeticError(f"no metric asks for {replicas} replicas of target {target}")


def scaler_metric(forecast_rps: float | None, target: float, limits: ReplicaLimits) -> float:
    """The metric KEDA is served: the held replicas' share of a paused model, else the forecast
    (None only when paused: it is not read then) with the replicas it asks for clamped into
    [min_replicas, max_replicas]."""
    if limits.held is not None:
        return replicas_metric(limits.held, target)
    if forecast_rps is None:
        raise ValueError("a model that is not paused is served its forecast")
    wanted = keda_replicas(forecast_rps, target)
    if limits.min_replicas is not None and wanted < limits.min_replicas:
        return replicas_metric(limits.min_replicas, target)
    if limits.max_replicas is not None and wanted > limits.max_replicas:
        return replicas_metric(limits.max_replicas, target)
    return forecast_rps


def fixed_activity(limits: ReplicaLimits) -> bool | None:
    """Whether the model is active as its pause or bounds fix it: a paused model while it holds
    a replica, a model with ``min_replicas`` > 0 always; None: the forecast decides."""
    if limits.held is not None:
        return limits.held > 0
    if (limits.min_replicas or 0) > 0:
        return True
    return None
