"""``headroom forecast run --csv`` into a store: the trace's unit is converted to requests/s
(``--value-unit``, simulate's converter), and only the series the models table lists are
stored; the others, and the table's models without rows, are named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from controlplane.cli.forecast import app
from controlplane.cli.forecast_csv import csv_coverage
from controlplane.forecast_job import Shard
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from tests.forecasting.builders import diurnal, long_csv

LISTED, OTHER = DEMO_MODELS[0].name, DEMO_MODELS[1].name
STRAY = "language/m-large"  # a series of a shared trace no models file names


def _store(url: str, listed: int) -> str:
    Store.open(url, migrate=True).upsert_models(DEMO_MODELS[:listed])
    return url


def _run(trace: Path, url: str, tmp_path: Path, *extra: str) -> Result:
    return CliRunner().invoke(app, [
        "run", "--csv", str(trace), "--store", url, "--step", "10m", "--history", "2d",
        "--method", "persistence", "--workers", "1", "--state-dir", str(tmp_path / "s"),
        "--json", *extra])


@pytest.mark.parametrize(("unit", "per_rps"), [("rpm", 60.0), ("per-step", 600.0)])
def test_a_trace_in_rpm_or_counts_per_step_is_stored_as_requests_per_second(
        tmp_path: Path, unit: str, per_rps: float) -> None:
    trace = long_csv(tmp_path / "t.csv", {LISTED: diurnal(2, 600, level=3000)}, 600)
    stored = {}
    for given in ("rps", unit):
        url = _store(f"sqlite:///{tmp_path / f'{given}.db'}", listed=1)
        result = _run(trace, url, tmp_path / given, "--value-unit", given)
        assert result.exit_code == 0, result.output
        stored[given] = Store.open(url).latest_forecasts()[LISTED]
    as_rps, converted = stored["rps"], stored[unit]
    assert np.allclose(np.array(converted.p50) * per_rps, as_rps.p50)
    assert np.allclose(np.array(converted.p90) * per_rps, as_rps.p90)
    assert converted.p50[0] == pytest.approx(as_rps.p50[0] / per_rps) and as_rps.p50[0] > 100


def test_a_value_unit_that_is_none_of_the_three_is_refused_naming_them(tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {LISTED: diurnal(1, 600)}, 600)
    result = CliRunner().invoke(app, ["run", "--csv", str(trace), "--no-store",
                                      "--value-unit", "qps"])
    assert result.exit_code == 2
    assert result.stderr == "error: --value-unit must be rps, rpm or per-step, got 'qps'\n"


def test_a_value_unit_without_a_csv_is_refused_rather_than_ignored(tmp_path: Path) -> None:
    url = _store(f"sqlite:///{tmp_path / 'h.db'}", listed=1)
    result = CliRunner().invoke(app, ["run", "--store", url, "--no-store",
                                      "--value-unit", "rpm"])
    assert result.exit_code == 2
    assert "--value-unit rpm: only a --csv trace has a value unit" in result.stderr


def test_a_series_the_models_table_does_not_list_is_not_stored_and_is_named(
        sqlite_url: str, tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {LISTED: diurnal(2, 600), STRAY: diurnal(2, 600)}, 600)
    result = _run(trace, _store(sqlite_url, listed=1), tmp_path)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["not_in_models"] == [STRAY] and doc["forecasts"] == 1 and doc["stored"]
    assert sorted(Store.open(sqlite_url).latest_forecasts()) == [LISTED]
    assert (f"warning: series {STRAY!r} of --csv {trace} is not in the store's models table: "
            "not forecast, not stored (import it with `headroom models import`") in result.stderr


def test_a_model_of_the_table_without_rows_in_the_trace_is_named(sqlite_url: str,
                                                                  tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {LISTED: diurnal(2, 600)}, 600)
    result = _run(trace, _store(sqlite_url, listed=2), tmp_path)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["models_without_rows"] == [OTHER] and doc["not_in_models"] == []
    assert sorted(Store.open(sqlite_url).latest_forecasts()) == [LISTED]
    assert (f"warning: model {OTHER!r} of the models table has no rows in --csv {trace}: no "
            "forecast for it from this run") in result.stderr


def test_a_trace_of_no_listed_model_stores_nothing_and_says_so(sqlite_url: str,
                                                               tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {STRAY: diurnal(2, 600)}, 600)
    result = _run(trace, _store(sqlite_url, listed=1), tmp_path)
    assert result.exit_code == 0, result.output  # as a run over no model
    doc = json.loads(result.stdout)
    assert doc["forecasts"] == 0 and not doc["stored"] and doc["not_in_models"] == [STRAY]
    assert Store.open(sqlite_url).latest_forecasts() == {}
    assert result.stderr.splitlines()[-1] == (
        f"warning: no forecast stored: no series of --csv {trace} is a model of the store's "
        "models table")


def test_an_empty_models_table_stores_every_series_with_a_warning(sqlite_url: str,
                                                                  tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {LISTED: diurnal(2, 600), STRAY: diurnal(2, 600)}, 600)
    result = _run(trace, _store(sqlite_url, listed=0), tmp_path)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["models_table_empty"] is True and doc["not_in_models"] == []
    assert sorted(Store.open(sqlite_url).latest_forecasts()) == sorted([LISTED, STRAY])
    assert "warning: the store's models table is empty: the forecasts of every series" \
        in result.stderr


def test_without_storing_every_series_is_forecast_and_none_is_checked(sqlite_url: str,
                                                                      tmp_path: Path) -> None:
    trace = long_csv(tmp_path / "t.csv", {LISTED: diurnal(2, 600), STRAY: diurnal(2, 600)}, 600)
    result = _run(trace, _store(sqlite_url, listed=1), tmp_path, "--no-store")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert sorted(doc["per_model"]) == sorted([LISTED, STRAY]) and doc["not_in_models"] == []
    assert "models table" not in result.stderr


def test_each_shard_names_only_its_own_series_and_models() -> None:
    shards = [Shard(i, 4) for i in range(4)]
    strays, listed = [f"stray-{k}" for k in range(8)], [f"model-{k}" for k in range(8)]
    named = [csv_coverage(strays + listed[:2], listed, None, s) for s in shards]
    assert sorted(n for c in named for n in c.not_in_models) == sorted(strays)
    assert sorted(m for c in named for m in c.without_rows) == sorted(listed[2:])
    assert all(c.stored == tuple(listed[:2]) for c in named)  # run_job splits them by shard


def test_models_without_rows_are_only_those_named_by_models_when_it_is_given() -> None:
    cover = csv_coverage(["a"], ["a", "b", "c"], ["a"], Shard())
    assert cover.without_rows == () and cover.stored == ("a",)
