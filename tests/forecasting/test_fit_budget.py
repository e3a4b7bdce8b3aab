"""The forecast job's fit budget: a cold start of a large fleet cannot hold a run for minutes."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.forecast import app
from controlplane.forecast_job import JobConfig, JobReport, run_job
from controlplane.forecast_pool import FIT_DEFERRED, pool_start_method
from controlplane.settings import load_settings
from controlplane.store import Store
from forecaster.types import TrafficSeries
from tests.forecasting.builders import diurnal, long_csv
from tests.forecasting.test_forecast_job import MODELS, NOW, filled_store

LATER = NOW + timedelta(days=50)  # data no other test fits in this process


class _Only:
    """The store's models, but only those named (a fleet that grows between runs)."""

    def __init__(self, store: Store, names: list[str]) -> None:
        self.store, self.names = store, names

    def model_names(self) -> list[str]:
        return list(self.names)

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        return self.store.rate_history(model, since_at, until_at, step_s)


def _config(state: Path, budget_s: float | None, workers: int = 1) -> JobConfig:
    return JobConfig(method="level", history_s=2 * 86_400, state_dir=state,
                     fit_budget_s=budget_s, workers=workers)


def _methods(report: JobReport) -> dict[str, tuple[str, str]]:
    return {f.series_id: (f.method, f.fallback_reason) for f in report.forecasts}


def test_a_spent_fit_budget_still_fits_one_model_and_gives_the_others_a_calibrated_persistence(
        sqlite_url: str, tmp_path: Path) -> None:
    store = filled_store(sqlite_url, now=LATER)
    report = run_job(store, store, LATER, _config(tmp_path / "state", budget_s=0.0))
    assert report.refits == 1 and report.deferred == len(MODELS) - 1 and report.reused == 0
    first, *rest = store.model_names()  # the first model without state, in the source's order
    kinds = _methods(report)
    assert kinds[first][1] != FIT_DEFERRED
    assert {kinds[m] for m in rest} == {("persistence", FIT_DEFERRED)}
    assert sorted(store.latest_forecasts()) == sorted(MODELS)  # nobody is left without one
    for made in report.forecasts:
        if made.fallback_reason == FIT_DEFERRED:
            assert made.p50 == (made.p50[0],) * len(made.p50) and made.p50[0] > 0  # last value
            assert made.p90_max() > made.p50[0]  # an upper tail from its own errors, not p50
    assert len(list((tmp_path / "state").glob("*.json"))) == 1  # only the one fitted


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_with_a_zero_budget_every_run_fits_one_model_per_worker_until_the_fleet_is_fitted(
        sqlite_url: str, tmp_path: Path, workers: int) -> None:
    now = LATER + timedelta(days=10 + workers)  # data no other test fits in this process
    store = filled_store(sqlite_url, now=now)
    state = tmp_path / "state"
    runs = -(-len(MODELS) // workers)  # ceil(N / workers)
    reports = [run_job(store, None, now + timedelta(minutes=k),
                       _config(state, budget_s=0.0, workers=workers)) for k in range(runs)]
    for k, report in enumerate(reports):
        fitted_before = min(k * workers, len(MODELS))
        assert report.reused == fitted_before
        assert report.refits == min(workers, len(MODELS) - fitted_before)
        assert report.deferred == len(MODELS) - fitted_before - report.refits
    assert reports[-1].deferred == 0
    assert FIT_DEFERRED not in {f.fallback_reason for f in reports[-1].forecasts}
    assert len(list(state.glob("*.json"))) == len(MODELS)


@pytest.mark.parametrize("unusable", ["of an older version", "of another model"])
def test_a_state_file_the_forecaster_cannot_use_is_a_first_fit_within_the_budget(
        sqlite_url: str, tmp_path: Path, unusable: str) -> None:
    # e.g. after an upgrade that changed the state format: every model must refit, and the
    # budget is what keeps that from holding one run for the whole fleet's fits
    now = LATER + timedelta(days=30)  # data no other test fits in this process
    store = filled_store(sqlite_url, now=now)
    state = tmp_path / "state"
    run_job(store, None, now, _config(state, budget_s=None))
    for path in state.glob("*.json"):
        doc = json.loads(path.read_text())
        doc.update({"version": 0} if unusable == "of an older version" else {"series_id": "x"})
        path.write_text(json.dumps(doc))
    report = run_job(store, None, now + timedelta(minutes=1), _config(state, budget_s=0.0))
    assert report.deferred == len(MODELS) - 1


@pytest.mark.parametrize("workers", [1, 2])
def test_models_with_stored_state_are_served_in_full_and_the_next_run_fits_the_deferred(
        sqlite_url: str, tmp_path: Path, workers: int) -> None:
    now = LATER + timedelta(days=workers)  # data no other test fits in this process (fitted
    store = filled_store(sqlite_url, now=now)  # models are cached per process and forked)
    state = tmp_path / "state"
    old, new = MODELS[:2], [m for m in store.model_names() if m not in MODELS[:2]]
    run_job(_Only(store, old), None, now, _config(state, budget_s=None))
    grown = run_job(store, None, now + timedelta(minutes=1),
                    _config(state, budget_s=0.0, workers=workers))
    # the budget was spent before the first fit could start: one first fit per worker anyway
    assert grown.reused == 2 and grown.refits == workers
    assert grown.deferred == len(MODELS) - 2 - workers
    kinds = _methods(grown)
    assert all(kinds[m][1] != FIT_DEFERRED for m in old + new[:workers])
    assert all(kinds[m] == ("persistence", FIT_DEFERRED) for m in new[workers:])
    caught_up = run_job(store, None, now + timedelta(minutes=2),
                        _config(state, budget_s=600.0, workers=workers))
    assert caught_up.deferred == 0 and caught_up.refits == len(MODELS) - 2 - workers
    assert caught_up.reused == 2 + workers
    assert FIT_DEFERRED not in {f.fallback_reason for f in caught_up.forecasts}
    assert len(list(state.glob("*.json"))) == len(MODELS)


def test_forecast_run_takes_a_fit_budget_and_reports_the_deferred_models(
        tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv",  # data no other test fits in this process
                     {"x": diurnal(3, 600, seed=11), "y": diurnal(3, 600, seed=12)}, 600)
    result = CliRunner().invoke(app, [
        "run", "--csv", str(trace), "--no-store", "--step", "10m", "--history", "3d",
        "--method", "level", "--workers", "1", "--state-dir", str(tmp_path / "s"),
        "--fit-budget-s", "0", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["refits"] == 1 and doc["deferred"] == 1  # budget 0: one first fit per worker
    assert doc["fallbacks"].get(FIT_DEFERRED) == 1
    assert doc["per_model"]["y"]["fallback_reason"] == FIT_DEFERRED
    assert doc["per_model"]["x"]["fallback_reason"] != FIT_DEFERRED


@pytest.mark.parametrize(("workers_setting", "workers_option", "pool"), [
    (None, None, 1), ("3", None, 3), ("3", "1", 1)])
def test_forecast_run_has_as_many_workers_as_the_forecast_workers_setting_unless_told(
        tmp_path: Path, workers_setting: str | None, workers_option: str | None,
        pool: int) -> None:
    # budget 0: each worker starts one first fit, so the refits count the workers
    seeds = {f"m{k}": 31 + k + 10 * pool + (5 if workers_option else 0) for k in range(4)}
    trace = long_csv(tmp_path / "t.csv",  # data no other test fits in this process
                     {name: diurnal(3, 600, seed=seed) for name, seed in seeds.items()}, 600)
    told = ["--workers", workers_option] if workers_option else []
    result = CliRunner().invoke(app, [
        "run", "--csv", str(trace), "--no-store", "--step", "10m", "--history", "3d",
        "--method", "level", "--state-dir", str(tmp_path / "s"), "--fit-budget-s", "0",
        "--json", *told], env={"HEADROOM_FORECAST__WORKERS": workers_setting})
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["refits"], doc["deferred"]) == (pool, len(seeds) - pool)


def test_the_refreshes_of_serve_and_demo_spend_half_their_interval_on_first_fits_by_default(
        ) -> None:
    assert load_settings(forecast={"interval_s": 300}).forecast.refresh_budget_s() == 150
    assert load_settings(forecast={"interval_s": 300, "fit_budget_s": 40}
                         ).forecast.refresh_budget_s() == 40


def test_a_process_with_other_threads_forecasts_in_a_pool_of_fresh_workers_and_agrees(
        sqlite_url: str, tmp_path: Path) -> None:
    now = LATER + timedelta(days=4)
    store = filled_store(sqlite_url, now=now)
    alone = run_job(store, None, now, _config(tmp_path / "a", budget_s=None, workers=1))
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait)  # as the gRPC server's threads in serve
    busy.start()
    try:
        assert pool_start_method() == "forkserver"
        pooled = run_job(store, None, now, _config(tmp_path / "b", budget_s=None, workers=2))
    finally:
        stop.set()
        busy.join()
    assert pooled.refits == len(MODELS)
    assert {f.series_id: f.p90 for f in pooled.forecasts} == \
        {f.series_id: f.p90 for f in alone.forecasts}
