"""A model's throughput per replica at its latency SLO, corrected online from observed metrics
(pure: samples and ``now`` in, a ``ProfileCorrection`` out).

Evidence is the model's samples (demand per ready replica, latency: the mean, or the quantile
the SLO is judged at) of the last ``window_s``, only those loaded to at least
``min_load_share`` x the value in use (the last correction, else the offline profile: a lightly
loaded replica says nothing about its limit).
With fewer than ``min_samples`` of them the value in use stands (``too_few_samples``): a quiet
night says nothing new about a replica's limit, so it does not undo what the busy day proved (a
model corrected down and reset to its offline profile overnight would run over its SLO again every
morning until fresh evidence built up). A fresh loop with no value in use has the offline profile.
Otherwise, from the value in use:

* samples within the SLO at per-replica rates above the value in use prove the model sustains
  more: the value rises to a high quantile (``high_quantile``) of those rates;
* samples above the SLO prove the sustainable rate is below their rates: the value is capped at
  ``safety`` x a low quantile (``low_quantile``) of their rates; while the value in use is the
  offline profile, not when that low quantile is within ``hysteresis`` below it or above it
  (then only the safety margin would lower it: a right profile loaded to its limit runs at the
  SLO, and a little noise puts half of those samples over it). A value already corrected has
  lost that benefit of the doubt: exempting it too left a model serving 0.6 x its profile sized
  up to 1/0.95 x its true throughput, 1.14 % short model-minutes instead of 0.36 % (seed 1);
* neither: the value in use stands (``no_evidence``).

Measured latency is noisy, so a sample counts only on its side of the split rate: the rate that
misplaces the fewest samples (over the SLO below it, within it at or above it), the highest such.
A sample a little over the SLO among samples within it at the same and higher rates is noise,
not the replica's limit (one such sample lowered a right profile by about 5 %, more at other
utilizations, and it stayed lowered); either side needs ``min_evidence_samples`` of its own.
Then the value is clamped to [``min_factor``, ``max_factor``] x offline, and kept unless it moved
by more than ``hysteresis`` of the value in use.

Why from the value in use, not from the offline profile (as a first sketch had it): once a model
is sized on a lowered value its replicas stop running over the SLO, so after ``window_s`` the
over-SLO evidence would be gone, the offline value would return, the replicas would run over the
SLO again and the correction would oscillate with a period of about ``window_s``. Samples within
the SLO below the value in use prove nothing either way; only samples above it can raise it.
For the same reason the load share is of the value in use: a model sized on a value lowered to
0.6 x offline runs its replicas at about 0.6 x 0.8 of offline, below half of it, and would
otherwise run out of samples and fall back to the offline value after ``window_s``.
The value in use is kept in the guard memory stored with every tick, so a restarted loop
decides as the stopped one did.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from controlplane.autoscaling.core import FleetModel
from controlplane.autoscaling.distribution import sorted_quantile
from controlplane.domain.profile import ProfileCorrection, ProfileSample, scaled_spec

TOO_FEW_SAMPLES = "too_few_samples"
OVER_SLO = "over_slo"
WITHIN_SLO = "within_slo"
NO_EVIDENCE = "no_evidence"
DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class CorrectionConfig:
    window_s: float = 3600.0
    min_samples: int = 10
    min_load_share: float = 0.5
    safety: float = 0.95
    min_factor: float = 0.5
    max_factor: float = 1.5
    hysteresis: float = 0.05
    low_quantile: float = 0.25
    high_quantile: float = 0.75
    min_evidence_samples: int = 3

    def __post_init__(self) -> None:
        if self.window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {self.window_s}")
        if self.min_evidence_samples < 1:
            raise ValueError(f"min_evidence_samples must be >= 1, got {self.min_evidence_samples}")
        if self.min_samples < 1:
            raise ValueError(f"min_samples must be >= 1, got {self.min_samples}")
        if self.min_load_share < 0:
            raise ValueError(f"min_load_share must be >= 0, got {self.min_load_share}")
        if not 0 < self.safety <= 1:
            raise ValueError(f"safety must be in (0, 1], got {self.safety}")
        if not 0 < self.min_factor <= 1 <= self.max_factor:
            raise ValueError(f"min_factor and max_factor must satisfy 0 < min_factor <= 1 <= "
                             f"max_factor, got {self.min_factor} and {self.max_factor}")
        if not 0 <= self.hysteresis < 1:
            raise ValueError(f"hysteresis must be in [0, 1), got {self.hysteresis}")
        for name in ("low_quantile", "high_quantile"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default); ``values`` non-empty."""
    return sorted_quantile(sorted(values), q)


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def evidence(used: Sequence[ProfileSample], latency_slo_ms: float, in_use_rps: float,
             config: CorrectionConfig) -> tuple[list[float], list[float]]:
    """The rates of the samples over the SLO, and of those within it above ``in_use_rps``, that
    count as evidence: those on their side of the split rate (at or above it over, below it
    within) that misplaces the fewest samples (the highest such rate), each set only with at
    least ``min_evidence_samples`` samples in it."""
    ranked = sorted(used, key=lambda s: (s.per_replica_rps, s.latency_ms))
    is_over = [s.latency_ms > latency_slo_ms for s in ranked]
    misplaced = fewest = len(is_over) - sum(is_over)  # split below all: every within misplaced
    split = 0
    for i, over in enumerate(is_over, 1):
        misplaced += 1 if over else -1
        if misplaced <= fewest:
            fewest, split = misplaced, i
    over_rps = [s.per_replica_rps for s, o in zip(ranked[split:], is_over[split:], strict=True)
                if o]
    within_rps = [s.per_replica_rps for s, o in zip(ranked[:split], is_over[:split], strict=True)
                  if not o and s.per_replica_rps > in_use_rps]
    enough = config.min_evidence_samples
    return (over_rps if len(over_rps) >= enough else [],
            within_rps if len(within_rps) >= enough else [])


def _lowering_below_rps(in_use_rps: float, offline_rps: float, config: CorrectionConfig) -> float:
    """The over-SLO low quantile under which the value in use is lowered: (1 - hysteresis) x the
    offline profile (exempt from the safety margin alone), else in use / safety (the cap
    safety x that quantile falls below it)."""
    if in_use_rps == offline_rps:
        return (1 - config.hysteresis) * in_use_rps
    return in_use_rps / config.safety


def correct(model: str, offline_rps: float, latency_slo_ms: float,
            samples: Sequence[ProfileSample], now: datetime, config: CorrectionConfig,
            previous_rps: float | None = None) -> ProfileCorrection:
    """The throughput per replica to size ``model`` with (rules in the module docstring);
    ``previous_rps`` is the value the last tick used (None: the offline profile)."""
    def made(rps: float, used: int, reason: str) -> ProfileCorrection:
        return ProfileCorrection(model, offline_rps, rps, rps / offline_rps, used, reason)

    in_use = previous_rps if previous_rps is not None else offline_rps
    floor_rps = config.min_load_share * in_use
    since_at = now - timedelta(seconds=config.window_s)
    used = [s for s in samples
            if since_at < s.at <= now and math.isfinite(s.per_replica_rps)
            and math.isfinite(s.latency_ms) and s.per_replica_rps >= floor_rps]
    if len(used) < config.min_samples:
        kept = min(max(in_use, config.min_factor * offline_rps), config.max_factor * offline_rps)
        return made(kept, len(used), f"{TOO_FEW_SAMPLES}: {len(used)} of "
                    f"{config.min_samples} needed at >= {_fmt(floor_rps)} rps/replica in "
                    f"{_fmt(config.window_s)} s; {_fmt(kept)} rps/replica kept")
    over, above = evidence(used, latency_slo_ms, in_use, config)
    proposed, reason = in_use, (f"{NO_EVIDENCE}: {_fmt(in_use)} rps/replica "
                                f"({_fmt(in_use / offline_rps)}x offline) kept; {len(used)} "
                                f"samples, none within {_fmt(latency_slo_ms)} ms above it, too "
                                f"few over it below "
                                f"{_fmt(_lowering_below_rps(in_use, offline_rps, config))}")
    if above:
        proposed = quantile(above, config.high_quantile)
        reason = (f"{WITHIN_SLO}: {len(above)} of {len(used)} samples within "
                  f"{_fmt(latency_slo_ms)} ms above {_fmt(in_use)} rps/replica")
    if over:
        over_low_rps = quantile(over, config.low_quantile)
        cap_rps = config.safety * over_low_rps
        if in_use == offline_rps and over_low_rps >= (1 - config.hysteresis) * in_use:
            cap_rps = max(cap_rps, in_use)  # the safety margin alone does not lower the profile
        if cap_rps < proposed:
            proposed = cap_rps
            reason = (f"{OVER_SLO}: {len(over)} of {len(used)} samples above "
                      f"{_fmt(latency_slo_ms)} ms at >= {_fmt(min(over))} rps/replica")
    low_rps, high_rps = config.min_factor * offline_rps, config.max_factor * offline_rps
    clamped = min(max(proposed, low_rps), high_rps)
    if clamped != proposed:
        reason += f"; clamped to {_fmt(clamped / offline_rps)}x offline"
    if abs(clamped - in_use) <= config.hysteresis * in_use:
        if clamped != in_use:
            reason += f"; kept {_fmt(in_use)} (new {_fmt(clamped)} within " \
                      f"{_fmt(100 * config.hysteresis)} %)"
        clamped = min(max(in_use, low_rps), high_rps)
    return made(clamped, len(used), reason)


def offline(model: str, offline_rps: float, reason: str = DISABLED) -> ProfileCorrection:
    """The offline profile as it is (correction off)."""
    return ProfileCorrection(model, offline_rps, offline_rps, 1.0, 0, reason)


def corrected_models(models: Sequence[FleetModel],
                     samples: Mapping[str, Sequence[ProfileSample]],
                     previous_rps: Mapping[str, float], now: datetime,
                     config: CorrectionConfig
                     ) -> tuple[tuple[FleetModel, ...], tuple[ProfileCorrection, ...]]:
    """Each model with its replica shape's throughput corrected and its spec's profile scaled
    by the same factor (so PlanFleet places what the core sized), and every correction."""
    out: list[FleetModel] = []
    corrections: list[ProfileCorrection] = []
    for model in models:
        got = correct(model.spec.name, model.shape.per_replica_rps, model.spec.latency_slo_ms,
                      samples.get(model.spec.name, ()), now, config,
                      previous_rps.get(model.spec.name))
        corrections.append(got)
        out.append(model if not got.is_corrected else replace(
            model, spec=scaled_spec(model.spec, got.factor),
            shape=replace(model.shape, per_replica_rps=got.corrected_rps)))
    return tuple(out), tuple(corrections)


def in_use(corrections: Sequence[ProfileCorrection]) -> tuple[tuple[str, float], ...]:
    """The guard memory's record of the corrected values in use (offline ones are left out)."""
    return tuple((c.model, c.corrected_rps) for c in corrections if c.is_corrected)
