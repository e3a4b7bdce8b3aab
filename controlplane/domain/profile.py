"""A model's profile as the loop uses it: the offline throughput and the one corrected from
observed metrics (pure values; the rules are in ``controlplane.autoscaling.profile_correction``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from controlplane.domain.models import ModelSpec


@dataclass(frozen=True, slots=True)
class ProfileSample:
    """One tick's evidence of a model: its observed demand per ready replica and the latency
    measured then (the mean, or the quantile its SLO is judged at)."""

    at: datetime
    per_replica_rps: float
    latency_ms: float


@dataclass(frozen=True, slots=True)
class ProfileCorrection:
    """The throughput per replica the loop sizes a model with, and why (``reason`` is a
    machine-readable code with its numbers, e.g. ``over_slo: 9 of 14 samples ...``)."""

    model: str
    offline_rps: float
    corrected_rps: float
    factor: float  # corrected / offline
    samples_used: int
    reason: str

    @property
    def is_corrected(self) -> bool:
        return self.corrected_rps != self.offline_rps


def scaled_spec(spec: ModelSpec, factor: float) -> ModelSpec:
    """``spec`` with every profile point's throughput scaled by ``factor`` (the best point
    stays the best: all scale alike)."""
    if factor == 1.0:
        return spec
    return replace(spec, profile=tuple(replace(p, throughput_rps=p.throughput_rps * factor)
                                       for p in spec.profile))
