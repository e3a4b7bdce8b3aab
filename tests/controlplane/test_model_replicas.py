"""Each model's replicas as a deciding tick set them (``domain.model_replicas``): its desired
target, the replicas its ladder keeps warm, its pause, its spec's bounds and latency SLO."""

from __future__ import annotations

from datetime import UTC, datetime

from controlplane.domain.desired import DesiredState, DesiredTarget
from controlplane.domain.model_replicas import ModelReplicas, model_replicas
from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.domain.pause import ModelPause

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
POINT = ProfilePoint("L4", 0, 8, 1, 300.0, 40.0, 8000)


def _spec(name: str, min_replicas: int | None = None,
          max_replicas: int | None = None) -> ModelSpec:
    return ModelSpec(name, "t", Isolation.TRUSTED, Engine.TRITON, 1000.0, (POINT,),
                     ColdStart(10.0, 20.0), min_replicas, max_replicas)


def test_each_model_the_tick_sized_has_its_target_warm_replicas_pause_bounds_and_slo() -> None:
    desired = DesiredState((), (DesiredTarget("chat", 4, "forecast_p90+min_replicas:4"),
                                DesiredTarget("embed", 2, "paused since ..."),
                                DesiredTarget("asr", 1, "forecast_p90")))
    specs = (_spec("chat", min_replicas=4, max_replicas=10), _spec("embed"))
    pauses = (ModelPause("embed", 2, T0, "alice"), ModelPause("retired", 0, T0))

    found = model_replicas(desired, {"chat": 3}, specs, pauses)

    assert found == (ModelReplicas("chat", 4, 3, None, 4, 10, 1000.0),
                     ModelReplicas("embed", 2, 0, T0, latency_slo_ms=1000.0),
                     ModelReplicas("asr", 1))  # no spec here: no bounds or SLO known
    assert [r.paused for r in found] == [False, True, False]
