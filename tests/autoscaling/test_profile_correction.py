"""Online profile correction: observed latency at observed per-replica load moves the throughput
a model is sized with, within bounds, and only on enough evidence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.autoscaling.profile_correction import (
    NO_EVIDENCE,
    OVER_SLO,
    TOO_FEW_SAMPLES,
    WITHIN_SLO,
    CorrectionConfig,
    correct,
    quantile,
)
from controlplane.domain.profile import ProfileCorrection, ProfileSample

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
CONFIG = CorrectionConfig()
OFFLINE_RPS = 18.0
SLO_MS = 500.0


def _samples(rates: list[float], latency_ms: float, start_s: int = 0) -> list[ProfileSample]:
    return [ProfileSample(T0 - timedelta(seconds=start_s + 30 * i), rps, latency_ms)
            for i, rps in enumerate(rates)]


def _correct(samples: list[ProfileSample], previous_rps: float | None = None,
             config: CorrectionConfig = CONFIG) -> ProfileCorrection:
    return correct("m", OFFLINE_RPS, SLO_MS, samples, T0, config, previous_rps)


def test_no_samples_keep_the_offline_profile() -> None:
    got = _correct([])
    assert (got.corrected_rps, got.factor, got.samples_used) == (OFFLINE_RPS, 1.0, 0)
    assert got.reason.startswith(TOO_FEW_SAMPLES)


def test_nine_loaded_samples_are_too_few_even_all_over_slo() -> None:
    got = _correct(_samples([16.0] * 9, 900.0))
    assert got.corrected_rps == OFFLINE_RPS
    assert got.reason == (f"{TOO_FEW_SAMPLES}: 9 of 10 needed at >= 9 rps/replica in 3600 s; "
                          "18 rps/replica kept")


def test_a_quiet_window_keeps_the_corrected_value_instead_of_resetting_to_offline() -> None:
    night = _samples([2.0] * 120, 150.0)  # far below half the value in use: no evidence
    got = _correct(night, previous_rps=10.4)
    assert (got.corrected_rps, got.samples_used) == (10.4, 0)
    assert got.reason.startswith(TOO_FEW_SAMPLES) and got.reason.endswith("10.4 rps/replica kept")


def test_a_value_in_use_outside_the_bounds_is_clamped_even_without_evidence() -> None:
    assert _correct([], previous_rps=1.0).corrected_rps == CONFIG.min_factor * OFFLINE_RPS
    assert _correct([], previous_rps=99.0).corrected_rps == CONFIG.max_factor * OFFLINE_RPS


def test_lightly_loaded_and_old_samples_do_not_count() -> None:
    light = _samples([5.0] * 20, 900.0)
    old = _samples([16.0] * 20, 900.0, start_s=3600)
    got = _correct(light + old)
    assert got.samples_used == 0
    assert got.corrected_rps == OFFLINE_RPS


def test_samples_over_slo_lower_the_profile_to_safety_times_their_low_quantile() -> None:
    over = _samples([15.0, 15.5, 16.0, 16.5] * 3, 800.0)
    within = _samples([12.0, 13.0], 300.0, start_s=400)
    got = _correct(over + within)
    assert got.corrected_rps == pytest.approx(0.95 * quantile([15.0, 15.5, 16.0, 16.5] * 3, 0.25))
    assert got.samples_used == 14
    assert got.reason == f"{OVER_SLO}: 12 of 14 samples above 500 ms at >= 15 rps/replica"


def test_samples_within_slo_above_offline_raise_it_at_most_to_max_factor() -> None:
    got = _correct(_samples([20.0, 21.0, 22.0] * 4, 300.0))
    assert got.corrected_rps == pytest.approx(quantile([20.0, 21.0, 22.0] * 4, 0.75))
    assert got.reason.startswith(WITHIN_SLO)
    capped = _correct(_samples([40.0] * 12, 300.0))
    assert capped.corrected_rps == pytest.approx(1.5 * OFFLINE_RPS)
    assert "clamped to 1.5x offline" in capped.reason


def test_a_lowered_profile_stays_lowered_while_replicas_serve_within_slo_below_it() -> None:
    """Sized on the lowered value, the replicas stop running over the SLO: that is no reason
    to return to the offline value (it would oscillate)."""
    got = _correct(_samples([11.0, 12.0, 13.0] * 5, 300.0), previous_rps=14.0)
    assert got.corrected_rps == 14.0
    assert got.reason.startswith(NO_EVIDENCE)


def test_a_change_within_five_percent_of_the_value_in_use_is_not_made() -> None:
    got = _correct(_samples([14.9] * 12, 300.0), previous_rps=14.5)
    assert got.corrected_rps == 14.5
    assert got.reason.startswith(WITHIN_SLO)
    assert "kept 14.5 (new 14.9 within 5 %)" in got.reason


def test_samples_over_slo_just_above_the_offline_profile_do_not_lower_it_by_the_safety_margin(
        ) -> None:
    """Replicas loaded past a right profile run over the SLO, too."""
    got = _correct(_samples([18.3] * 12, 700.0))
    assert got.corrected_rps == OFFLINE_RPS
    assert got.reason.startswith(NO_EVIDENCE)


def test_a_corrected_value_is_lowered_by_the_safety_margin_when_samples_just_below_it_are_over(
        ) -> None:
    """A value already corrected has no benefit of the doubt: over-SLO samples at 12.8, within
    5 % below the 13 in use (the offline profile would keep them as noise), cap it at 0.95 x
    12.8: the true limit is below 12.8."""
    got = _correct(_samples([12.8] * 12, 700.0), previous_rps=13.0)
    assert got.corrected_rps == pytest.approx(0.95 * 12.8)
    assert got.reason.startswith(OVER_SLO)


def test_samples_over_slo_within_five_percent_below_the_value_in_use_do_not_lower_it() -> None:
    """Their low quantile x safety would be 8 % below it: that is the safety margin, not proof
    (the offline profile lowered to 0.92 by latency noise right at its limit)."""
    got = _correct(_samples([17.5] * 12, 520.0) + _samples([16.0] * 12, 450.0, start_s=600))
    assert got.corrected_rps == OFFLINE_RPS
    assert got.reason.startswith(NO_EVIDENCE)


def test_a_few_samples_noised_over_slo_among_many_within_it_at_higher_rates_are_no_evidence() -> (
        None):
    within = _samples([15.0, 16.0, 17.0, 17.5] * 10, 450.0)
    noised = _samples([14.0, 15.5, 16.5], 520.0, start_s=1800)
    got = _correct(within + noised)
    assert got.corrected_rps == OFFLINE_RPS
    assert got.reason.startswith(NO_EVIDENCE)


def test_samples_over_slo_at_the_highest_rates_lower_the_profile_despite_a_few_noised_within() -> (
        None):
    over = _samples([15.0, 15.5, 16.0, 16.5] * 5, 800.0)
    noised = _samples([15.2, 16.2], 480.0, start_s=1200)
    within = _samples([11.0, 12.0, 13.0] * 4, 300.0, start_s=1500)
    got = _correct(over + noised + within)
    assert got.corrected_rps == pytest.approx(0.95 * quantile([15.0, 15.5, 16.0, 16.5] * 5, 0.25))
    assert got.reason.startswith(OVER_SLO)


def test_fewer_than_three_samples_on_either_side_are_no_evidence() -> None:
    loaded = _samples([12.0] * 12, 300.0)
    assert _correct(loaded + _samples([15.0, 15.0], 900.0, start_s=400)).corrected_rps == (
        OFFLINE_RPS)
    assert _correct(loaded + _samples([25.0, 25.0], 300.0, start_s=400)).corrected_rps == (
        OFFLINE_RPS)
    with pytest.raises(ValueError, match="min_evidence_samples"):
        CorrectionConfig(min_evidence_samples=0)


def test_the_same_samples_give_the_same_correction_in_any_order() -> None:
    samples = _samples([15.0, 17.0, 14.0, 19.0, 16.0] * 3, 700.0) + _samples([20.0] * 4, 200.0)
    assert _correct(samples) == _correct(list(reversed(samples)))


def test_a_config_out_of_range_names_the_field() -> None:
    with pytest.raises(ValueError, match="safety"):
        CorrectionConfig(safety=1.5)
    with pytest.raises(ValueError, match="min_factor"):
        CorrectionConfig(min_factor=1.2)


_sample = st.builds(
    ProfileSample,
    at=st.integers(0, 7200).map(lambda s: T0 - timedelta(seconds=s)),
    per_replica_rps=st.floats(0, 60, allow_nan=False),
    latency_ms=st.floats(1, 5000, allow_nan=False))
_previous = st.none() | st.floats(0.5 * OFFLINE_RPS, 1.5 * OFFLINE_RPS)


@given(st.lists(_sample, max_size=60), _previous)
def test_the_corrected_profile_always_stays_within_its_factor_bounds(
        samples: list[ProfileSample], previous_rps: float | None) -> None:
    got = _correct(samples, previous_rps)
    assert 0.5 * OFFLINE_RPS - 1e-9 <= got.corrected_rps <= 1.5 * OFFLINE_RPS + 1e-9
    assert got.factor == pytest.approx(got.corrected_rps / OFFLINE_RPS)
    assert got.samples_used <= len(samples)


@given(st.lists(st.floats(9.0, 60.0), max_size=60), st.floats(501, 5000), _previous)
def test_evidence_all_over_slo_never_raises_the_value_in_use(
        rates: list[float], latency_ms: float, previous_rps: float | None) -> None:
    got = _correct(_samples(rates, latency_ms), previous_rps)
    in_use = previous_rps if previous_rps is not None else OFFLINE_RPS
    assert got.corrected_rps <= in_use + 1e-9


_loaded = st.builds(
    ProfileSample,
    at=st.integers(0, 3500).map(lambda s: T0 - timedelta(seconds=s)),
    per_replica_rps=st.floats(9, 60),
    latency_ms=st.floats(1, 5000))


@given(st.lists(_loaded, min_size=10, max_size=40), st.floats(9, 60), _previous)
def test_one_more_sample_over_slo_at_its_lowest_rate_never_raises_the_correction(
        samples: list[ProfileSample], rps: float, previous_rps: float | None) -> None:
    over = [s.per_replica_rps for s in samples if s.latency_ms > SLO_MS]
    slower = ProfileSample(T0, min([rps, *over]), 9999.0)
    before, after = _correct(samples, previous_rps), _correct([*samples, slower], previous_rps)
    assert after.corrected_rps <= before.corrected_rps + 1e-9


def test_no_evidence_names_the_rate_over_slo_samples_would_have_to_fall_below() -> None:
    """The offline profile is lowered only by over-SLO samples under 0.95 x it; a corrected
    value by any whose cap, 0.95 x their low quantile, is under it: below 13 / 0.95."""
    loaded = _samples([11.0, 12.0, 13.0] * 5, 300.0)
    assert _correct(loaded).reason.endswith("too few over it below 17.1")
    corrected = _correct(loaded, previous_rps=13.0)
    assert corrected.corrected_rps == 13.0
    assert corrected.reason.endswith(f"too few over it below {13.0 / 0.95:.4g}")
