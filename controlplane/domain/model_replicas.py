"""Each model's replicas as a deciding tick set them, for the tick's report (pure values): the
replica target it wanted, the replicas' worth the warm-pool ladder keeps warm beside them, the
pause that holds it (since when) and its spec's replica bounds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from controlplane.domain.desired import DesiredState
from controlplane.domain.models import ModelSpec
from controlplane.domain.pause import ModelPause


@dataclass(frozen=True, slots=True)
class ModelReplicas:
    model: str
    # the desired replica target (demand, bounds, GPU budgets or the pause that holds it), before
    # the guards pace the way to it (the plan's skipped changes say what they held back)
    target: int
    # replicas the ladder keeps warm beyond the target: loaded idle replicas and GPU share held
    # for replicas on nodes that are up (its idle and cached rungs)
    warm: int = 0
    paused_at: datetime | None = None  # None: not paused
    min_replicas: int | None = None  # the spec's bounds; None: unset
    max_replicas: int | None = None
    latency_slo_ms: float | None = None  # the spec's; None: no spec

    @property
    def paused(self) -> bool:
        return self.paused_at is not None


def model_replicas(desired: DesiredState, warm: Mapping[str, int], specs: Sequence[ModelSpec],
                   pauses: Sequence[ModelPause]) -> tuple[ModelReplicas, ...]:
    """One per model ``desired`` sets replicas for (every model the tick sized): its target,
    its ``warm`` replicas (model -> idle + cached rungs; none listed: 0), its pause (a pause of
    a model the tick did not size is left out), its bounds and its latency SLO (a model with no
    spec: none)."""
    spec_of = {s.name: s for s in specs}
    paused_at = {p.model: p.paused_at for p in pauses}
    out = []
    for target in desired.replicas:
        spec = spec_of.get(target.target)
        out.append(ModelReplicas(target.target, target.value, warm.get(target.target, 0),
                                 paused_at.get(target.target),
                                 spec.min_replicas if spec is not None else None,
                                 spec.max_replicas if spec is not None else None,
                                 spec.latency_slo_ms if spec is not None else None))
    return tuple(out)
