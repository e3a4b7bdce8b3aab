"""``--json`` prints one JSON document on stdout, also when the command fails: ``ok`` false, the
exit code and the text of each ``error:`` line (Click's message for its own usage errors); a
command that printed its document and exits non-zero on purpose prints nothing more, and
without ``--json`` stdout stays empty on failure."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clihelpers import WARM_HEADROOM, _env

from controlplane.store import Store

TRACE = "ts,model,rate_rps\n2025-01-01 00:00:00,m,1\n2025-01-01 00:01:00,m,2\n"


def _run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, *args], env=_env(COLUMNS="400", **env), cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _failure(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The failure document on stdout, checked against the exit code and the error lines."""
    doc: dict[str, Any] = json.loads(run.stdout)
    assert "Traceback" not in run.stderr, run.stderr
    assert doc["ok"] is False and doc["exit_code"] == run.returncode == 2
    return doc


def _error_lines(stderr: str) -> list[str]:
    return [line.removeprefix("error: ") for line in stderr.splitlines()
            if line.startswith("error: ")]


def _migrated_store(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    Store.open(f"sqlite:///{path}", migrate=True).engine.dispose()  # `headroom db upgrade`
    return path


@pytest.mark.parametrize("url", ["sqlite:///{tmp}/missing.db",
                                 "postgresql+psycopg://postgres@127.0.0.1:1/headroom"],
                         ids=["missing-sqlite-file", "unreachable-postgresql"])
def test_status_of_a_store_it_cannot_open_prints_the_failure_document_only_with_json(
        tmp_path: Path, url: str) -> None:
    db_url = url.format(tmp=tmp_path)
    with_json = _run("status", "--json", cwd=tmp_path, HEADROOM_DB__URL=db_url)
    doc = _failure(with_json)
    assert doc["errors"] == _error_lines(with_json.stderr)
    (line,) = doc["errors"]
    assert line.startswith(("store sqlite:///", "cannot reach database postgresql"))
    assert "(db.url from environment HEADROOM_DB__URL)" in line
    without = _run("status", cwd=tmp_path, HEADROOM_DB__URL=db_url)
    assert without.returncode == 2 and without.stdout == ""
    assert without.stderr == with_json.stderr  # the error lines as they were


def test_simulate_with_a_bad_models_file_prints_the_document_naming_the_field(
        tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text(TRACE, encoding="utf-8")
    (tmp_path / "models.yaml").write_text(
        "models:\n  - {name: m, gpu_product: A100-80GB, per_replica_rps: -2.0, "
        "gpu_per_replica: 1.0, isolation: STRICT, tenant: acme,\n"
        "     cold_start: {p50_s: 22, p90_s: 39}}\n", encoding="utf-8")
    run = _run("simulate", "--json", "--trace", "trace.csv", "--models", "models.yaml",
               "--timeline-out", "timeline.csv", cwd=tmp_path)
    assert _failure(run)["errors"] == [
        "models.yaml: models[0] (m): per_replica_rps: must be > 0, got -2.0"]


def test_a_backtest_of_a_missing_column_prints_the_document_naming_it(tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text(TRACE, encoding="utf-8")
    run = _run("forecast", "backtest", "--json", "--csv", "trace.csv", "--time-col", "ts",
               "--value-col", "rps", "--predictions-out", "predictions.csv", cwd=tmp_path)
    assert _failure(run)["errors"] == ["trace.csv: no column 'rps' (found: ts, model, rate_rps)"]


def test_hint_list_with_a_bad_settings_file_lists_every_error_line_in_the_document(
        tmp_path: Path) -> None:
    (tmp_path / "headroom.yaml").write_text("db:\n  url: 5\nreconcile:\n  interval_s: -3\n",
                                            encoding="utf-8")
    run = _run("hint", "list", "--json", "--config", "headroom.yaml", cwd=tmp_path)
    assert _failure(run)["errors"] == [
        "headroom.yaml: db.url: Input should be a valid string",
        "headroom.yaml: reconcile.interval_s: Input should be greater than 0, got -3"]


def test_models_list_of_a_file_without_the_schema_prints_the_document_saying_to_upgrade(
        tmp_path: Path) -> None:
    Store.open(f"sqlite:///{tmp_path / 'other.db'}").engine.dispose()  # a file, no tables
    run = _run("models", "list", "--json", "--db", "other.db", cwd=tmp_path)
    (line,) = _failure(run)["errors"]
    assert line.startswith(f"store sqlite:///{tmp_path / 'other.db'} has no Headroom schema")
    assert "headroom db upgrade" in line


@pytest.mark.parametrize(("args", "message"), [
    (("status", "--json", "--no-such-option"), "No such option: --no-such-option"),
    (("forecast", "backtest", "--json"), "Missing option '--csv'."),
    (("status", "--json", "--max-tick-age-s", "-1"),
     "Invalid value for '--max-tick-age-s': -1.0 is not in the range x>=0.0"),
], ids=["unknown-option", "missing-option", "bad-value"])
def test_a_usage_error_of_click_prints_the_document_when_json_is_among_the_args(
        tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    run = _run(*args, cwd=tmp_path)
    assert _failure(run)["errors"] == [message]
    without = _run(*(a for a in args if a != "--json"), cwd=tmp_path)
    assert without.returncode == 2 and without.stdout == ""


def test_a_listing_that_succeeds_prints_its_one_document_and_nothing_else(
        tmp_path: Path) -> None:
    _migrated_store(tmp_path)
    run = _run("models", "list", "--json", "--db", "store.db", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []


def test_status_exiting_1_while_unhealthy_prints_its_own_document_only(tmp_path: Path) -> None:
    _migrated_store(tmp_path)  # no reconcile tick yet: unhealthy
    run = _run("status", "--json", "--db", "store.db", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)  # one document: a second would be "Extra data"
    assert doc["healthy"] is False and [p["code"] for p in doc["problems"]] == ["no_tick"]
    assert "exit_code" not in doc


def test_a_forecast_run_with_a_failed_model_prints_its_own_document_only(tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text(
        "ts,model,rate_rps\n2025-01-01 00:00:00,m,abc\n2025-01-01 00:01:00,m,abc\n"
        "2025-01-01 00:00:00,n,1\n2025-01-01 00:01:00,n,2\n", encoding="utf-8")
    run = _run("forecast", "run", "--json", "--csv", "trace.csv", "--no-store", "--step", "60s",
               "--horizon", "2m", "--history", "1h", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    assert doc["ok"] is False and list(doc["failed"]) == ["m"] and "exit_code" not in doc
