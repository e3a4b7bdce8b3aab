"""The boosted model for coarse dense series: where it is used, what it may read, how it is
stored, and that it learns what the level model cannot (a few small scikit-learn fits)."""

from __future__ import annotations

import json

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from forecaster.boosted import BAG_SEEDS, PARAMS, BoostedFit, boosted_features, eligible
from forecaster.persist import export_state, import_state
from forecaster.registry import get_forecaster
from forecaster.settings import ForecasterSettings
from forecaster.stacking import StackingForecaster
from forecaster.trees import Bag, Trees
from tests.forecasting.builders import NoSeason, diurnal, history
from tests.forecasting.builders import boosted_auto as auto

STEP = 600
DAY = 86_400



def test_tree_arrays_predict_what_the_fitted_regressor_predicts() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 5))
    y = x[:, 0] - 2 * x[:, 1] * (x[:, 2] > 0) + rng.normal(0, 0.1, 600)
    x[rng.random(x.shape) < 0.05] = np.nan  # missing values follow the fitted branch
    model = HistGradientBoostingRegressor(**PARAMS, random_state=0).fit(x, y)
    trees = Trees.from_sklearn(model)
    probe = rng.normal(size=(300, 5))
    probe[rng.random(probe.shape) < 0.05] = np.nan
    np.testing.assert_allclose(trees.predict(probe), model.predict(probe), rtol=0, atol=1e-12)
    stored = Trees.from_json(json.loads(json.dumps(trees.to_json())))
    np.testing.assert_array_equal(stored.predict(probe), trees.predict(probe))


def test_a_bag_predicts_the_mean_of_its_fitted_regressors_and_stores_them_all() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(600, 5))
    y = x[:, 0] - 2 * x[:, 1] * (x[:, 2] > 0) + rng.normal(0, 0.1, 600)
    models = [HistGradientBoostingRegressor(**PARAMS, random_state=seed).fit(x, y)
              for seed in BAG_SEEDS]
    bag = Bag(tuple(Trees.from_sklearn(m) for m in models))
    probe = rng.normal(size=(300, 5))
    each = np.stack([m.predict(probe) for m in models])
    assert float(np.ptp(each, axis=0).max()) > 1e-3  # the seeds pick different features
    np.testing.assert_allclose(bag.predict(probe), each.mean(axis=0), rtol=0, atol=1e-12)
    stored = Bag.from_json(json.loads(json.dumps(bag.to_json())))
    assert len(stored.members) == len(BAG_SEEDS)
    np.testing.assert_array_equal(stored.predict(probe), bag.predict(probe))


def test_trees_stored_before_bagging_load_as_a_bag_of_one_with_the_same_predictions() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(400, 4))
    y = x[:, 0] + rng.normal(0, 0.1, 400)
    trees = Trees.from_sklearn(HistGradientBoostingRegressor(**PARAMS, random_state=0).fit(x, y))
    old = Bag.from_json(json.loads(json.dumps(trees.to_json())))
    assert len(old.members) == 1
    np.testing.assert_array_equal(old.predict(x), trees.predict(x))


def test_a_boosted_forecast_is_the_mean_of_its_members_log_ratios_to_the_level() -> None:
    h = history(diurnal(8, STEP, seed=3), STEP)
    fit = auto().fit(h, h.start_s + 8 * DAY, (1, 2))
    assert isinstance(fit, BoostedFit)
    origins = np.arange(h.size - 200, h.size)
    for lead in (1, 2):
        assert len(fit.models[lead].members) == len(BAG_SEEDS) == 3
        x, log_level = boosted_features(h, origins, lead, fit.zeros_as_gaps)
        each = np.stack([m.predict(x) for m in fit.models[lead].members])
        assert float(np.ptp(each, axis=0).max()) > 1e-3
        np.testing.assert_allclose(fit.point(h, origins, lead),
                                   np.expm1(log_level + each.mean(axis=0)), rtol=1e-12)


def test_boosted_features_read_only_values_before_each_origin() -> None:
    values = diurnal(9, STEP, seed=4)
    origins = np.arange(1000, 1200)
    changed = values.copy()
    changed[1100:] = 2 * changed[1100:] + 1
    before = origins <= 1100
    for lead in (1, 2):
        x, level = boosted_features(history(values, STEP), origins, lead)
        x2, level2 = boosted_features(history(changed, STEP), origins, lead)
        np.testing.assert_array_equal(x[before], x2[before])
        np.testing.assert_array_equal(level[before], level2[before])
        assert np.all(np.isfinite(x))


def test_only_coarse_mostly_non_zero_series_are_eligible() -> None:
    s = ForecasterSettings()
    dense = history(diurnal(6, STEP, seed=1), STEP)
    assert eligible(dense, dense.start_s + 6 * DAY, s)
    minute = history(diurnal(1, 60, seed=1), 60)
    assert not eligible(minute, minute.start_s + DAY, s)
    sparse_values = diurnal(6, STEP, seed=1)
    sparse_values[np.arange(sparse_values.size) % 10 != 0] = 0.0  # 90 % zeros
    sparse = history(sparse_values, STEP)
    assert not eligible(sparse, sparse.start_s + 6 * DAY, s)
    assert not eligible(dense, dense.start_s + 6 * DAY, ForecasterSettings(boosted_min_step_s=DAY))


def test_boosted_model_learns_a_daily_swing_the_last_value_misses() -> None:
    # a sharp swing every day at 12:00 (x3 for an hour): persistence is late by two steps there
    t = np.arange(14 * DAY // STEP) * STEP
    rng = np.random.default_rng(5)
    values = 100 * np.where((t % DAY >= 12 * 3600) & (t % DAY < 13 * 3600), 3.0, 1.0)
    values = values * (1 + rng.normal(0, 0.05, t.size))
    h = history(values, STEP)
    origins = np.arange(13 * DAY // STEP, h.size - 1)
    pred = auto().predict(h, origins, 2)
    assert set(pred.method) == {"boosted"}
    y = values[origins + 1]
    wape = float(np.sum(np.abs(y - pred.p50[:, 1])) / np.sum(y))
    persistence = float(np.sum(np.abs(y - values[origins - 1])) / np.sum(y))
    assert wape < 0.7 * persistence
    assert np.all(pred.p90 >= pred.p50) and np.all(pred.p50 >= 0)
    coverage = float(np.mean(y <= pred.p90[:, 1]))
    assert 0.8 <= coverage <= 0.98


def test_boosted_forecast_at_an_origin_ignores_everything_from_the_origin_on() -> None:
    values = diurnal(8, STEP, seed=7)
    origin = 1100
    # the origins the origin's own fit serves (from its refit anchor on, 29 here): that fit was
    # trained nearest to the changed values, the one anchor before it is further from them
    h, cadence = history(values, STEP), auto()
    at = cadence.anchor_for(h, origin)
    origins = np.array([o for o in range(origin - 100, origin + 1)
                        if cadence.anchor_for(h, o) == at])
    assert origins[0] > origin - 100 and origins.size > 1
    full = auto().predict(history(values, STEP), origins, 2)
    changed = values.copy()
    changed[origin:] = 2 * changed[origin:] + 1
    perturbed = auto().predict(history(changed, STEP), origins, 2)
    cut = auto().predict(history(values[:origin + 1], STEP), np.array([origin]), 2)
    assert set(full.method) == {"boosted"}
    np.testing.assert_array_equal(full.p50, perturbed.p50)
    np.testing.assert_array_equal(full.p90, perturbed.p90)
    np.testing.assert_allclose(full.p50[-1], cut.p50[0], rtol=1e-12)
    np.testing.assert_allclose(full.p90[-1], cut.p90[0], rtol=1e-12)


def test_a_stored_boosted_fit_serves_the_next_run_without_refitting() -> None:
    h = history(diurnal(8, STEP, seed=3), STEP)
    origin = np.array([h.size])
    first = auto()
    before = first.predict(h, origin, 2)
    doc = json.loads(json.dumps(export_state(first, h, h.size, (1, 2))))
    assert doc["boosted"]["method"] == "boosted" and set(doc["boosted"]["trees"]) == {"1", "2"}
    assert all(len(t["members"]) == len(BAG_SEEDS) for t in doc["boosted"]["trees"].values())
    fresh = auto()
    assert import_state(fresh, h, doc) == 1
    after = fresh.predict(h, origin, 2)
    assert fresh.fits_done == 0
    np.testing.assert_array_equal(before.p50, after.p50)
    np.testing.assert_array_equal(before.p90, after.p90)
    edited = h.values.copy()
    edited[h.index_at(doc["boosted"]["anchor_s"]) - 10] += 50  # data before the anchor changed
    assert import_state(auto(), history(edited, STEP), doc) == 0


def test_a_boosted_model_worse_than_a_baseline_recently_is_replaced() -> None:
    # a random walk: nothing beats the last value, so a strict guard falls back to persistence
    rng = np.random.default_rng(2)
    values = 100 * np.exp(np.cumsum(rng.normal(0, 0.05, 8 * DAY // STEP)))
    h = history(values, STEP)
    strict = StackingForecaster("hybrid", NoSeason(), guard=True,  # type: ignore[arg-type]
                                settings=ForecasterSettings(guard_margin=0.0))
    fit = strict.fit(h, h.start_s + 8 * DAY, (1, 2))
    assert not isinstance(fit, BoostedFit)
    assert fit.reason == "worse_than_baseline" and fit.method in {"persistence", "hour_mean"}


def test_the_registry_auto_method_uses_the_boosted_model_on_ten_minute_traffic() -> None:
    pred = get_forecaster("auto").predict(history(diurnal(8, STEP, seed=8), STEP),
                                          np.array([8 * DAY // STEP - 1]), 2)
    assert pred.method == ("boosted",)
    assert np.isfinite(pred.backtest_wape[0])


def test_in_a_dense_series_a_dropout_to_zero_does_not_drag_the_recent_level_down() -> None:
    values = diurnal(8, STEP, seed=6)
    dropped = values.copy()
    dropped[1000] = 0.0  # one scrape that arrived as a zero
    origins = np.array([1001])
    plain, level = boosted_features(history(values, STEP), origins, 2, zeros_as_gaps=True)
    gap, gap_level = boosted_features(history(dropped, STEP), origins, 2, zeros_as_gaps=True)
    raw, raw_level = boosted_features(history(dropped, STEP), origins, 2)
    assert abs(gap_level[0] - level[0]) < 0.05  # the hour's other values carry the level
    assert raw_level[0] < level[0] - 0.1  # counted as a value, the zero pulls the mean down
    assert gap[0, 1] == 0.0 and raw[0, 1] < -3  # the last lag: no change vs a collapse
    np.testing.assert_array_equal(plain[0, -2:], gap[0, -2:])  # the calendar is unchanged
    fit = auto().fit(history(dropped, STEP), history(dropped, STEP).start_s + 8 * DAY, (1, 2))
    assert isinstance(fit, BoostedFit) and fit.zeros_as_gaps
