"""A day of ticks through the pure correction: a fleet sized on the value in use, the sim's
queueing latency (``controlplane.sim.latency``) at the observed load, and measurement noise on
every sample's mean latency, as a scraped mean over 30 s of a few hundred requests has."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from controlplane.autoscaling.profile_correction import CorrectionConfig, correct
from controlplane.domain.profile import ProfileCorrection, ProfileSample
from controlplane.sim.latency import queue_latency_ms
from controlplane.sim.traffic import TrafficShape, rate_rps

T0 = datetime(2026, 1, 5, tzinfo=UTC)
TICK_S = 30
OFFLINE_RPS = 2.0
UNLOADED_MS, SLO_MS = 300.0, 1000.0
#: a diurnal day with bursts and 10 % per-minute noise, a fleet of 10 to 40 replicas
SHAPE = TrafficShape("m", 40.0, 15.0, 0.5, 0.7, 3, 1.8, 0.1)
#: lognormal sigma of the measured mean latency
NOISE_SIGMA = 0.05
#: the fleet is sized for this share of the value in use, on the rate of 5 minutes ago
TARGET_UTILIZATION = 0.85


def day_of_corrections(true_factor: float, seed: int) -> list[ProfileCorrection]:
    config, noise = CorrectionConfig(), random.Random(seed)
    samples: list[ProfileSample] = []
    previous_rps: float | None = None
    out = []
    for tick in range(86400 // TICK_S):
        now = T0 + timedelta(seconds=tick * TICK_S)
        in_use_rps = previous_rps or OFFLINE_RPS
        sized_for_rps = rate_rps(SHAPE, seed, now - timedelta(minutes=5))
        ready = max(1, math.ceil(sized_for_rps / (TARGET_UTILIZATION * in_use_rps)))
        demand_rps = rate_rps(SHAPE, seed, now)
        latency_ms = queue_latency_ms(UNLOADED_MS, SLO_MS, true_factor * OFFLINE_RPS,
                                      demand_rps, ready)
        assert latency_ms is not None
        samples = [s for s in samples if s.at > now - timedelta(seconds=config.window_s)]
        samples.append(ProfileSample(now, demand_rps / ready,
                                     latency_ms * math.exp(noise.gauss(0, NOISE_SIGMA))))
        got = correct("m", OFFLINE_RPS, SLO_MS, samples, now, config, previous_rps)
        previous_rps = got.corrected_rps if got.is_corrected else None
        out.append(got)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_correctly_profiled_model_is_never_corrected_through_a_day_of_noisy_latency(
        seed: int) -> None:
    corrections = day_of_corrections(1.0, seed)
    assert any(c.samples_used >= 10 for c in corrections)  # the day gave evidence to judge
    assert [c for c in corrections if c.is_corrected] == []


@pytest.mark.parametrize("true_factor", [0.8, 0.6])
def test_a_slow_model_is_still_lowered_to_its_true_throughput_through_the_same_noise(
        true_factor: float) -> None:
    last = day_of_corrections(true_factor, 1)[-1]
    assert last.factor == pytest.approx(true_factor, abs=0.05)
