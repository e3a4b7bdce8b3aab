"""`headroom forecast run` whose store fails mid-run: an error line naming the store and the
database's error, exit 2 (deploy/forecast-cronjob.yaml's code for a store it cannot use); the
hint to run `headroom db upgrade` only when a table or column is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env
from sqlalchemy import create_engine

from controlplane.store import Store
from tests.forecasting.builders import diurnal, long_csv

UPGRADE_HINT = "run `headroom db upgrade`"


def _forecast_run(tmp_path: Path, url: str) -> subprocess.CompletedProcess[str]:
    trace = long_csv(tmp_path / "t.csv", {"m1": diurnal(2, 600)}, 600)
    return subprocess.run([
        *WARM_HEADROOM, "forecast", "run", "--csv", str(trace), "--store", url, "--step", "10m",
        "--history", "1d", "--method", "persistence", "--workers", "1",
        "--state-dir", str(tmp_path / "state")], env=_env(COLUMNS="400"), cwd=tmp_path,
        capture_output=True, text=True, timeout=300)


def _run_ddl(url: str, sql: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(sql)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_store_connection_terminated_mid_write_is_named_without_blaming_the_schema(
        tmp_path: Path, postgres_url: str) -> None:
    Store.open(postgres_url, migrate=True).engine.dispose()
    _run_ddl(postgres_url, (  # the session writing forecasts ends, as when the server restarts
        "CREATE FUNCTION end_session() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$; "
        "CREATE TRIGGER t BEFORE INSERT ON forecasts FOR EACH ROW "
        "EXECUTE FUNCTION end_session()"))
    run = _forecast_run(tmp_path, postgres_url)
    assert run.returncode == 2, run.stderr
    line = run.stderr.splitlines()[-1]  # after the progress bars
    assert line.startswith(f"error: store {postgres_url}: ")
    assert "terminat" in line
    assert UPGRADE_HINT not in line


def test_a_store_missing_the_forecasts_table_gets_the_hint_to_upgrade(
        tmp_path: Path, sqlite_url: str) -> None:
    Store.open(sqlite_url, migrate=True).engine.dispose()
    _run_ddl(sqlite_url, "DROP TABLE forecasts")
    run = _forecast_run(tmp_path, sqlite_url)
    assert run.returncode == 2, run.stderr
    line = run.stderr.splitlines()[-1]  # after the progress bars
    assert line.startswith(f"error: store {sqlite_url}: ")
    assert "no such table: forecasts" in line
    assert line.endswith(f"(is the schema created? {UPGRADE_HINT})")
