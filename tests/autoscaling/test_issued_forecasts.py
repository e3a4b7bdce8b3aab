"""The live loop's issued-forecast records and the calibration rebuilt from them (pure)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from controlplane.autoscaling.calibration import ForecastErrors, calibrated
from controlplane.autoscaling.issued import (
    IssuedForecast,
    accuracy,
    calibrated_forecasts,
    errors_from,
    issued,
    unrecorded,
)
from controlplane.domain.demand import ratio_key
from controlplane.domain.forecast_accuracy import ForecastAccuracy
from forecaster.types import Forecast

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def _scored(minute: int, p50: float, observed: float | None, sigma: float = 0.1,
            model: str = "m") -> IssuedForecast:
    return IssuedForecast(model, _at(minute), 60, p50, p50 * 1.1, sigma).scored(
        observed, _at(minute + 1))


def test_observing_all_at_once_keeps_the_errors_observing_one_by_one_keeps() -> None:
    rng = random.Random(3)
    triples = [(rng.uniform(0, 20), rng.choice([0.0, math.nan, rng.uniform(1, 30)]),
                rng.uniform(0, 0.5)) for _ in range(300)]
    one_by_one = ForecastErrors(max_size=100)
    for p50, actual, sigma in triples:
        one_by_one = one_by_one.observe(p50, actual, sigma)
    assert ForecastErrors(max_size=100).observe_all(triples) == one_by_one


def test_a_record_is_due_once_its_step_has_passed_and_until_it_is_scored() -> None:
    record = IssuedForecast("m", _at(0), 60, 10.0, 12.0, 0.1)
    assert not record.is_due(_at(0) + timedelta(seconds=59))
    assert record.is_due(_at(1))
    assert not record.scored(11.0, _at(1)).is_due(_at(5))
    assert not record.scored(None, _at(1)).is_due(_at(5))  # nothing observed: scored anyway


def test_a_forecast_is_recorded_by_its_first_step() -> None:
    forecast = Forecast("m", _at(3), 60, (10.0, 20.0), (12.0, 25.0), "t")
    assert issued(forecast, 0.2) == IssuedForecast("m", _at(3), 60, 10.0, 12.0, 0.2)
    assert issued(Forecast("m", _at(3), 60, (), (), "t"), 0.2) is None


def test_only_forecasts_in_the_window_not_recorded_yet_are_new() -> None:
    fresh = Forecast("a", _at(10), 60, (1.0,), (1.0,), "t")
    known = Forecast("b", _at(10), 60, (1.0,), (1.0,), "t")
    too_old = Forecast("c", _at(0), 60, (1.0,), (1.0,), "t")
    empty = Forecast("d", _at(10), 60, (), (), "t")
    records = (IssuedForecast("b", _at(10), 60, 1.0, 1.0, 0.1),
               IssuedForecast("a", _at(9), 60, 1.0, 1.0, 0.1))
    forecasts = {f.series_id: f for f in (fresh, known, too_old, empty)}
    assert unrecorded(forecasts, records, since_at=_at(5)) == (fresh,)


def test_errors_come_from_scored_records_oldest_first_and_gaps_carry_none() -> None:
    records = [_scored(2, 10.0, 30.0), _scored(0, 10.0, 10.0), _scored(1, 10.0, None),
               IssuedForecast("m", _at(3), 60, 10.0, 11.0, 0.1)]  # not scored yet
    errors = errors_from(records, max_errors=10)
    assert errors.scaled_errors == (0.0, math.log(3.0) / 0.1)
    assert errors_from(records, max_errors=1).scaled_errors == (math.log(3.0) / 0.1,)


def test_a_forecast_is_calibrated_from_its_models_errors_at_the_volatility_of_its_origin() -> None:
    # forecasts of "m" kept undershooting by 2x; "other" was always right
    history = [_scored(i, 10.0, 20.0, sigma=0.2) for i in range(48)]
    history += [_scored(i, 10.0, 10.0, sigma=0.2, model="other") for i in range(48)]
    now = Forecast("m", _at(60), 60, (10.0,), (11.0,), "t")
    current = IssuedForecast("m", _at(60), 60, 10.0, 11.0, 0.4)
    tuned = calibrated_forecasts({"m": now}, [*history, current], max_errors=4032)["m"]
    expected = calibrated(now, errors_from(history[:48], 4032), 0.4)
    assert tuned == expected
    assert tuned.diagnostics[ratio_key(0.99)] == math.exp(math.log(2.0) / 0.2 * 0.4)


def test_a_forecast_without_its_record_or_with_few_errors_is_left_as_it_is() -> None:
    unknown = Forecast("m", _at(60), 60, (10.0,), (11.0,), "t")
    history = [_scored(i, 10.0, 20.0) for i in range(48)]
    assert calibrated_forecasts({"m": unknown}, history, 4032) == {"m": unknown}
    few = [*history[:47], IssuedForecast("m", _at(60), 60, 10.0, 11.0, 0.1)]
    assert calibrated_forecasts({"m": unknown}, few, 4032) == {"m": unknown}


def test_accuracy_is_wape_and_p90_coverage_over_the_steps_scored_with_data_in_the_window() -> None:
    records = [
        _scored(0, 100.0, 50.0),  # before the window: left out
        _scored(10, 100.0, 100.0),  # |0|, covered (p90 110)
        _scored(11, 100.0, 120.0),  # |20|, not covered
        _scored(12, 100.0, None),  # no data over its step: left out
        IssuedForecast("m", _at(13), 60, 100.0, 110.0, 0.1),  # not scored yet: left out
        _scored(14, 10.0, 0.0, model="quiet"),  # nothing served: no WAPE, covered
    ]
    assert accuracy(records, _at(10)) == (
        ForecastAccuracy("m", 2, 20.0 / 220.0, 0.5),
        ForecastAccuracy("quiet", 1, None, 1.0),
    )
    assert accuracy(records, _at(20)) == ()
