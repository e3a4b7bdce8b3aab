"""The replica bounds and pauses KEDA's external scaler honours (``controlplane.adapters.keda``),
read from the store at every call: ``headroom models pause`` / ``resume`` and a re-imported
models file take effect at the next GetMetrics, IsActive or stream poll, with no restart.

A pause without ``--replicas`` holds the replicas the reconcile loop would hold: the replica
target of the model's workload as observed, here by the newest recorded tick. When no tick
recorded the workload, or the newest one is over ``max_observed_age_s`` old (the loop is not
running), the scaler cannot know them: the call is FAILED_PRECONDITION naming the pause (KEDA's
``fallback`` applies, and without one the HPA keeps the replicas it has), never the forecast.
"""

from __future__ import annotations

import grpc

from controlplane.adapters.keda_query import ScalerError, store_down
from controlplane.domain.pause import ModelPause
from controlplane.domain.scaler_limits import ReplicaLimits
from controlplane.ports import Clock, LastObservedState, ModelPauses, ReplicaBounds


class StoredLimits:
    def __init__(self, pauses: ModelPauses, bounds: ReplicaBounds, observed: LastObservedState,
                 clock: Clock, *, max_observed_age_s: float = 120.0) -> None:
        self._pauses, self._bounds, self._observed = pauses, bounds, observed
        self._clock = clock
        self._max_observed_age_s = max_observed_age_s

    def limits(self, model: str) -> ReplicaLimits:
        """The model's replica bounds and the replicas its pause holds, as stored now."""
        try:
            pause = next((p for p in self._pauses.paused_models() if p.model == model), None)
            low, high = self._bounds.replica_bounds(model)
        except Exception as error:  # the store is down: as for the forecasts
            raise store_down("keda.limits_unread", "replica bounds and pause", model,
                             error) from None
        return ReplicaLimits(low, high, None if pause is None else self._held(pause))

    def _held(self, pause: ModelPause) -> int:
        """The replicas ``pause`` holds: its count, else the replica target of the model's
        workload the newest recorded tick observed, at most ``max_observed_age_s`` ago."""
        if pause.replicas is not None:
            return pause.replicas
        try:
            observed = self._observed.last_observed()
        except Exception as error:
            raise store_down("keda.observed_unread", "observed replicas", pause.model,
                             error) from None
        seen = None if observed is None else observed.model(pause.model)
        if observed is None or seen is None:
            why = "no recorded tick observed its workload"
        else:
            age_s = (self._clock.now() - observed.synced_at).total_seconds()
            if age_s <= self._max_observed_age_s:
                return seen.replicas_target
            why = (f"the newest recorded tick observed it {age_s:.0f}s ago (limit "
                   f"{self._max_observed_age_s:.0f}s)")
        raise ScalerError(grpc.StatusCode.FAILED_PRECONDITION,
                          f"model {pause.model!r} is {pause.reason()}, held at its current "
                          f"replicas, and {why}; it is not scaled on its forecast (KEDA's "
                          f"fallback applies): hold it at a count with `headroom models pause "
                          f"{pause.model} --replicas N`")
