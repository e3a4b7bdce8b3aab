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

LATER = NOW + timedelta(days=5)  # data no other test fits in this process


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


def test_a_spent_fit_budget_gives_every_model_without_state_a_calibrated_persistence_forecast(
        sqlite_url: str, tmp_path: Path) -> None:
    store = filled_store(sqlite_url, now=LATER)
    report = run_job(store, store, LATER, _config(tmp_path / "state", budget_s=0.0))
    assert report.deferred == len(MODELS) and report.refits == 0 and report.reused == 0
    assert set(_methods(report).values()) == {("persistence", FIT_DEFERRED)}
    assert sorted(store.latest_forecasts()) == sorted(MODELS)  # nobody is left without one
    for made in report.forecasts:
        assert made.p50 == (made.p50[0],) * len(made.p50) and made.p50[0] > 0  # the last value
        assert made.p90_max() > made.p50[0]  # an upper tail from its own errors, not p50
    assert not list((tmp_path / "state").glob("*.json"))  # nothing was fitted


@pytest.mark.parametrize("workers", [1, 2])
def test_models_with_stored_state_are_served_in_full_and_the_next_run_fits_the_deferred(
        sqlite_url: str, tmp_path: Path, workers: int) -> None:
    now = LATER + timedelta(days=workers)  # data no other test fits in this process (fitted
    store = filled_store(sqlite_url, now=now)  # models are cached per process and forked)
    state = tmp_path / "state"
    run_job(_Only(store, MODELS[:2]), None, now, _config(state, budget_s=None))
    grown = run_job(store, None, now + timedelta(minutes=1),
                    _config(state, budget_s=0.0, workers=workers))
    assert grown.reused == 2 and grown.deferred == len(MODELS) - 2 and grown.refits == 0
    kinds = _methods(grown)
    assert all(kinds[m][1] != FIT_DEFERRED for m in MODELS[:2])
    assert all(kinds[m] == ("persistence", FIT_DEFERRED) for m in MODELS[2:])
    caught_up = run_job(store, None, now + timedelta(minutes=2),
                        _config(state, budget_s=600.0, workers=workers))
    assert caught_up.deferred == 0 and caught_up.refits == len(MODELS) - 2
    assert caught_up.reused == 2
    assert FIT_DEFERRED not in {f.fallback_reason for f in caught_up.forecasts}
    assert len(list(state.glob("*.json"))) == len(MODELS)


def test_forecast_run_takes_a_fit_budget_and_reports_the_deferred_models(
        tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(3, 600), "y": diurnal(3, 600, seed=5)},
                     600)
    result = CliRunner().invoke(app, [
        "run", "--csv", str(trace), "--no-store", "--step", "10m", "--history", "3d",
        "--method", "level", "--workers", "1", "--state-dir", str(tmp_path / "s"),
        "--fit-budget-s", "0", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["deferred"] == 2 and doc["fallbacks"] == {FIT_DEFERRED: 2}
    assert {m["fallback_reason"] for m in doc["per_model"].values()} == {FIT_DEFERRED}


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
