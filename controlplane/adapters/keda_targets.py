"""KEDA's per-replica targets follow the profiles the reconcile loop corrected online.

A ScaledObject on Headroom's external scaler divides the forecast by a per-replica target rate
(``scalerMetadata.targetRps``, else the model's default here). That default is the throughput
per replica the reconcile loop sizes the model with x ``reconcile.target_utilization``: the
offline profile, or the one corrected from observed latency (``autoscaling.profile_correction``)
as the newest deciding tick recorded it, so KEDA and the loop agree on what a replica serves.
The store is read at most every ``refresh_s``; a failed read keeps the last targets (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from controlplane.domain.models import RpsByModel, live_rps
from controlplane.ports import Clock, ProfileReader

log = logging.getLogger("headroom.keda")


class CorrectedTargets:
    """Per-replica target rates by model, from the loop's newest recorded profiles."""

    def __init__(self, offline_rps: RpsByModel, utilization: float, profiles: ProfileReader,
                 clock: Clock, refresh_s: float = 30.0) -> None:
        """``offline_rps``: each model's offline per-replica throughput, or what gives the
        current models' at each call (``serve``'s models in use: a model imported or removed
        since start is targeted, or not, at once)."""
        self._offline = live_rps(offline_rps)
        self._utilization = utilization
        self._profiles = profiles
        self._clock = clock
        self._refresh_s = refresh_s
        self._read_at: datetime | None = None
        self._recorded: dict[str, float] = {}

    def targets(self) -> Mapping[str, float]:
        now = self._clock.now()
        if self._read_at is None or (now - self._read_at).total_seconds() >= self._refresh_s:
            self._read_at = now
            try:
                self._recorded = {p.model: p.corrected_rps
                                  for p in self._profiles.last_profiles()}
            except Exception as error:  # the store is down: the last profiles read stand
                log.warning("keda.targets_unread", extra={"error": str(error)})
        return {m: self._recorded.get(m, rps) * self._utilization
                for m, rps in self._offline().items()}
