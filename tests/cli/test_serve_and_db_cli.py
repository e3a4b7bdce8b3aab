"""`headroom serve` and `headroom db` as an operator runs them."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from clihelpers import HEADROOM, WARM_HEADROOM, _env, _free_port, _wait_for
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, inspect, text

from controlplane.store import Store
from controlplane.store.engine import scripts
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc

HEAD = scripts().get_current_head()  # this Headroom's newest migration


def test_db_upgrade_then_downgrade_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    env = _env(HEADROOM_DB__URL=postgres_url)
    up = subprocess.run([*WARM_HEADROOM, "db", "upgrade"], env=env, capture_output=True, text=True,
                        timeout=120)
    assert up.returncode == 0, up.stderr
    engine = create_engine(postgres_url)
    assert {"ticks", "plans", "forecasts"} <= set(inspect(engine).get_table_names())
    down = subprocess.run([*WARM_HEADROOM, "db", "downgrade", "base", "--yes"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert "ticks" not in set(inspect(engine).get_table_names())
    engine.dispose()


def test_db_upgrade_does_not_print_the_database_password(postgres_url: str) -> None:
    with_password = postgres_url.replace("postgres@", "postgres:s3cret@")  # trust auth ignores it
    up = subprocess.run([*WARM_HEADROOM, "db", "upgrade"], env=_env(HEADROOM_DB__URL=with_password),
                        capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stderr
    assert "upgraded to head" in up.stderr + up.stdout
    assert "s3cret" not in up.stderr + up.stdout


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_db_upgrade_of_an_in_memory_database_is_refused_as_keeping_nothing(url: str) -> None:
    run = subprocess.run([*WARM_HEADROOM, "db", "upgrade"], env=_env(HEADROOM_DB__URL=url),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: db.url {url}: an in-memory database ends with this "
                                 "command, so a migration would keep nothing")
    assert run.stderr.count("\n") == 1


def test_serve_with_the_sim_backend_runs_ticks_serves_grpc_and_stops_on_sigterm(
        tmp_path: Path) -> None:
    port, metrics_port = _free_port(), _free_port()
    config = tmp_path / "headroom.yaml"
    config.write_text(f"backend: sim\ndb:\n  url: sqlite:///{tmp_path / 'serve.db'}\n"
                      f"placement:\n  listen: 127.0.0.1:{port}\n"
                      f"  metrics_listen: 127.0.0.1:{metrics_port}\nreconcile:\n  interval_s: 1\n"
                      "  max_staleness_s: 30\nsim:\n  history_s: 3600\n")
    env = _env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{port}")  # the env beats the YAML file
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(config)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stub = pb_grpc.PlacementStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        _wait_for(lambda: stub.GetPlan(pb.GetPlanRequest(), timeout=2).revision >= 1, 60)
        assert stub.GetPlan(pb.GetPlanRequest(), timeout=2).gpus
        url = f"http://127.0.0.1:{metrics_port}/metrics"

        def scrape() -> dict[str, float]:
            """Each sample name's value, summed over its label sets (ticks by status)."""
            with urllib.request.urlopen(url, timeout=10) as response:
                text = response.read().decode()
            summed: dict[str, float] = {}
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    summed[sample.name] = summed.get(sample.name, 0.0) + sample.value
            return summed

        # the plan above can be the start's take-over plan, made just before the first tick
        _wait_for(lambda: scrape().get("headroom_reconcile_ticks_total", 0) >= 1, 60)
        scraped = scrape()
        assert scraped["headroom_fleet_plan_revision"] >= 1  # read from the serving engine
        assert "headroom_placement_inventory_gpus" in scraped  # the sim's nodes are still coming
        assert scraped["headroom_reconcile_ticks_total"] >= 1  # the loop's metrics, same endpoint
    finally:
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr


def test_serve_dry_run_records_plans_without_applying(tmp_path: Path) -> None:
    from controlplane.store import Store

    port = _free_port()
    db = tmp_path / "dry.db"
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: sqlite:///{db}\nplacement:\n  listen: 127.0.0.1:{port}\n"
                      "reconcile:\n  interval_s: 1\n  max_staleness_s: 30\n"
                      "sim:\n  history_s: 3600\n")
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(config), "--dry-run"],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: db.exists() and Store.open(f"sqlite:///{db}").counts()["plans"] >= 2, 60)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    store = Store.open(f"sqlite:///{db}")
    observed = store.last_observed()
    assert observed is not None and observed.gpus_ready() == 0  # nothing was applied


@pytest.mark.postgres
def test_db_upgrade_errors_name_the_postgresql_url_as_the_operator_wrote_it(
        postgres_url: str) -> None:
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    run = subprocess.run([*WARM_HEADROOM, "db", "upgrade", "nosuchrev"],
                         env=_env(HEADROOM_DB__URL=plain), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: database {plain}: cannot upgrade to 'nosuchrev': ")
    assert "+psycopg" not in run.stderr


def test_db_upgrade_to_an_unknown_revision_is_one_line_naming_it_and_creates_no_store(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    run = subprocess.run([*WARM_HEADROOM, "db", "upgrade", "nosuchrev"],
                         env=_env(HEADROOM_DB__URL=url), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip() == (f"error: database {url}: cannot upgrade to 'nosuchrev': "
                                  "Can't locate revision identified by 'nosuchrev'")
    assert not (tmp_path / "store.db").exists()  # no empty store left behind


def test_db_upgrade_to_an_unknown_revision_keeps_an_existing_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    subprocess.run([*WARM_HEADROOM, "db", "upgrade"], env=_env(HEADROOM_DB__URL=url), check=True,
                   capture_output=True, timeout=120)
    run = subprocess.run([*WARM_HEADROOM, "db", "upgrade", "nosuchrev"],
                         env=_env(HEADROOM_DB__URL=url), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert inspect(create_engine(url)).has_table("ticks")


def test_db_downgrade_of_a_store_migrated_by_a_newer_headroom_names_its_revision(
        sqlite_url: str) -> None:
    env = _env(HEADROOM_DB__URL=sqlite_url)
    assert subprocess.run([*WARM_HEADROOM, "db", "upgrade"], env=env, capture_output=True,
                          timeout=120).returncode == 0
    engine = create_engine(sqlite_url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0099_future'"))
    run = subprocess.run([*WARM_HEADROOM, "db", "downgrade", "base", "--yes"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "cannot downgrade to 'base': Can't locate revision identified by '0099_future'" in (
        run.stderr)
    assert "Traceback" not in run.stderr
    assert "ticks" in set(inspect(engine).get_table_names())  # nothing was dropped
    engine.dispose()


@pytest.mark.parametrize("revision", ["base", "0017"])
def test_db_downgrade_of_a_store_file_that_does_not_exist_is_refused_and_creates_nothing(
        tmp_path: Path, revision: str) -> None:
    """A mistyped path: opening it would create an empty store and report it downgraded."""
    missing = tmp_path / "typo" / "store.db"
    url = f"sqlite:///{missing}"
    run = subprocess.run([*WARM_HEADROOM, "db", "downgrade", revision],
                         env=_env(HEADROOM_DB__URL=url), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert run.stderr == (f"error: db.url {url}: no store at {missing}, so nothing to "
                          "downgrade; check the path\n")
    assert not missing.exists() and not missing.parent.exists()


@pytest.mark.parametrize("command", [["serve"], ["demo", "--minutes", "1", "--no-dashboard"]])
def test_serve_and_demo_on_a_store_migrated_by_a_newer_headroom_say_so_and_what_to_run(
        tmp_path: Path, command: list[str]) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    Store.open(url, migrate=True).engine.dispose()
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0099_future'"))
    engine.dispose()
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: {url}\n")
    run = subprocess.run([*WARM_HEADROOM, *command, "--config", str(config)], env=_env(),
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.endswith(
        "cannot upgrade to 'head': Can't locate revision identified by '0099_future' (the "
        "store's own revision: a newer Headroom migrated it; run that version, or its "
        f"`headroom db downgrade {HEAD}` first)\n"), run.stderr
    assert run.stderr.count("\n") == 1


@pytest.mark.parametrize("revision", ["0003", "base"])
def test_db_upgrade_to_a_revision_the_store_is_past_is_refused_naming_the_way_back(
        sqlite_url: str, revision: str) -> None:
    env = _env(HEADROOM_DB__URL=sqlite_url)
    assert subprocess.run([*WARM_HEADROOM, "db", "upgrade"], env=env, capture_output=True,
                          timeout=120).returncode == 0
    run = subprocess.run([*WARM_HEADROOM, "db", "upgrade", revision], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2  # it said "upgraded to 0003" (or base) and left the store at head
    assert run.stderr == (f"error: database {sqlite_url}: cannot upgrade to '{revision}': it "
                          f"is at revision '{HEAD}', past it; `headroom db downgrade {revision}` "
                          "goes back\n")
    assert inspect(create_engine(sqlite_url)).has_table("placement_bindings")  # as it was


def test_a_database_url_of_a_scheme_headroom_cannot_open_is_one_line_naming_db_url() -> None:
    run = subprocess.run([*WARM_HEADROOM, "db", "upgrade"],
                         env=_env(HEADROOM_DB__URL="mssql+pymssql://headroom@127.0.0.1/hr"),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith(
        "error: environment variable HEADROOM_DB__URL: db.url: Value error, "
        "'mssql+pymssql://headroom@127.0.0.1/hr': Headroom cannot open a mssql+pymssql:// "
        "store; supported schemes: sqlite, sqlite+pysqlite, postgresql, postgres, "
        "postgresql+psycopg")
    assert run.stderr.count("\n") == 1


@pytest.mark.parametrize("command", [["serve"], ["demo", "--minutes", "1", "--no-dashboard"]])
def test_an_unknown_forecast_method_stops_demo_and_serve_before_they_start(
        tmp_path: Path, command: list[str]) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: sqlite:///{tmp_path / 'store.db'}\n"
                      "forecast:\n  method: prophett\n")
    run = subprocess.run([*WARM_HEADROOM, *command, "--config", str(config)], env=_env(),
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: {config}: forecast.method: unknown forecast method "
                                 "'prophett'; choose one of auto, ")
    assert run.stderr.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["headroom.yaml"]  # no store, no log


@pytest.mark.parametrize("command", [["serve"], ["demo", "--minutes", "1", "--no-dashboard"]])
@pytest.mark.parametrize("field", ["listen", "metrics_listen"])
def test_an_address_that_cannot_be_bound_here_stops_demo_and_serve_before_they_start(
        tmp_path: Path, command: list[str], field: str) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: sqlite:///{tmp_path / 'store.db'}\n")
    env = _env(**{f"HEADROOM_PLACEMENT__{field.upper()}": "256.0.0.1:1"})
    run = subprocess.run([*WARM_HEADROOM, *command, "--config", str(config)], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: {config}: placement.{field}: '256.0.0.1:1': cannot "
                                 "resolve '256.0.0.1' (")
    assert run.stderr.count("\n") == 1  # no line of gRPC's own before it
    assert [p.name for p in tmp_path.iterdir()] == ["headroom.yaml"]  # no store, no log


@pytest.mark.parametrize("command", [["serve"], ["demo", "--minutes", "1", "--no-dashboard"]])
def test_a_state_dir_that_cannot_be_written_stops_demo_and_serve_before_the_store_is_made(
        tmp_path: Path, command: list[str]) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: sqlite:///{tmp_path / 'store.db'}\n")
    env = _env(HEADROOM_FORECAST__STATE_DIR=str(config / "state"))
    run = subprocess.run([*WARM_HEADROOM, *command, "--config", str(config)], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr == (f"error: forecast.state_dir {config / 'state'}: cannot write there "
                          "(Not a directory); set a writable directory, or null to refit every "
                          "model on every refresh\n")
    assert [p.name for p in tmp_path.iterdir()] == ["headroom.yaml"]  # no store, no log


@pytest.mark.parametrize("store", ["missing", "empty file", "migrated, no models"])
def test_serve_with_the_kubernetes_backend_and_no_models_stops_before_anything_is_written(
        tmp_path: Path, store: str) -> None:
    db = tmp_path / "stores" / "store.db"
    url = f"sqlite:///{db}"
    if store != "missing":
        db.parent.mkdir()
        db.touch()
    if store == "migrated, no models":
        Store.open(url, migrate=True).engine.dispose()
    before = db.read_bytes() if db.exists() else None
    config = tmp_path / "headroom.yaml"
    config.write_text(f"backend: kubernetes\ndb:\n  url: {url}\n"
                      f"k8s:\n  kubeconfig: {tmp_path / 'no-kubeconfig'}\n"
                      "prometheus:\n  url: http://127.0.0.1:9\n")  # never asked: refused first
    run = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(config)], env=_env(),
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: {url}: the store lists no models; "), run.stderr
    assert run.stderr.count("\n") == 1
    assert not (tmp_path / "forecaster-state").exists()  # nor the forecaster's state dir
    if store == "missing":
        assert [p.name for p in tmp_path.iterdir()] == ["headroom.yaml"]  # no store, no dir
        return
    assert db.read_bytes() == before  # not migrated, not switched to WAL
    engine = create_engine(url)
    tables = set(inspect(engine).get_table_names())
    engine.dispose()
    assert "models" in tables if store == "migrated, no models" else tables == set()


@pytest.mark.parametrize("field", ["listen", "metrics_listen"])
def test_serve_on_a_port_another_process_holds_is_one_line_naming_the_setting(
        tmp_path: Path, field: str) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: sqlite:///{tmp_path / 'store.db'}\nsim:\n  history_s: 3600\n")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = _env(**{f"HEADROOM_PLACEMENT__{field.upper()}": f"127.0.0.1:{port}"})
        run = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(config)], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr == (f"error: {config}: placement.{field}: '127.0.0.1:{port}': port {port} "
                          "is taken (Address already in use)\n")  # gRPC's own line no more
    assert [p.name for p in tmp_path.iterdir()] == ["headroom.yaml"]  # no store, no log


def test_db_upgrade_of_tables_made_without_migrations_is_one_line_naming_the_clash(
        sqlite_url: str) -> None:
    from sqlmodel import SQLModel

    import controlplane.store.tables  # noqa: F401  (registers the tables)

    engine = create_engine(sqlite_url)
    SQLModel.metadata.create_all(engine)  # tables, but no alembic_version stamp
    engine.dispose()
    run = subprocess.run([*WARM_HEADROOM, "db", "upgrade"], env=_env(HEADROOM_DB__URL=sqlite_url),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert re.fullmatch(rf"error: database {re.escape(sqlite_url)}: cannot upgrade to 'head': "
                        r"table \w+ already exists\n", run.stderr), run.stderr


def test_serve_with_metrics_on_the_placement_apis_own_port_is_one_line_naming_both_settings(
        tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: sqlite:///{tmp_path / 'store.db'}\n")
    port = _free_port()
    env = _env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{port}",
               HEADROOM_PLACEMENT__METRICS_LISTEN=f"0.0.0.0:{port}")
    run = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(config)], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr == (f"error: {config}: placement.metrics_listen: '0.0.0.0:{port}' is the "
                          f"port of placement.listen '127.0.0.1:{port}'; serve it on "
                          "another port\n")  # not gRPC's bind failure blaming placement.listen
    assert [p.name for p in tmp_path.iterdir()] == ["headroom.yaml"]  # no store, no log


def test_sim_serve_leaves_the_forecasts_to_forecast_run_when_told(tmp_path: Path) -> None:
    db = tmp_path / "external.db"
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: sqlite:///{db}\nplacement:\n"
                      f"  listen: 127.0.0.1:{_free_port()}\n"
                      "reconcile:\n  interval_s: 1\n  max_staleness_s: 30\n"
                      "sim:\n  history_s: 3600\nforecast:\n  refresh_in_serve: false\n"
                      "  method: level\n")
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(config)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: db.exists() and Store.open(f"sqlite:///{db}").counts()["ticks"] >= 2, 60)
        assert Store.open(f"sqlite:///{db}").counts()["forecasts"] == 0
        # the job that refreshes instead: the store's models, from the observations serve saves
        run = subprocess.run([*WARM_HEADROOM, "forecast", "run", "--config", str(config)],
                             env=_env(), capture_output=True, text=True, timeout=120)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert stderr.count('"event": "forecast.refresh_external"') == 1, stderr
    assert run.returncode == 0, run.stderr
    store = Store.open(f"sqlite:///{db}")
    assert set(store.latest_forecasts()) == set(store.model_names()) != set()


def test_sim_serve_resumed_on_a_store_an_hour_old_ticks_at_the_wall_clock_and_status_is_healthy(
        tmp_path: Path) -> None:
    """`headroom serve` with the sim backend runs in real time: resumed on a store whose last tick
    is an hour old, its ticks are stamped with the wall clock, not an hour behind it, so
    `headroom status` does not call the running loop stale (its virtual clock used to resume
    from the last tick and fall further behind with every slow tick)."""
    from datetime import UTC, datetime, timedelta

    from controlplane.runtime import SimRuntime
    from controlplane.settings import load_settings

    db = tmp_path / "resumed.db"
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: sqlite:///{db}\nplacement:\n"
                      f"  listen: 127.0.0.1:{_free_port()}\n"
                      "reconcile:\n  interval_s: 1\n  max_staleness_s: 30\n"
                      "sim:\n  history_s: 3600\nforecast:\n  method: level\n")
    hour_ago = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    store = Store.open(f"sqlite:///{db}", migrate=True)
    SimRuntime.open(load_settings(config), store, hour_ago).start()  # the last run's tick
    store.engine.dispose()
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(config)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def status_healthy() -> bool:
        status = subprocess.run([*WARM_HEADROOM, "status", "--config", str(config)], env=_env(),
                                capture_output=True, text=True, timeout=60)
        return status.returncode == 0

    try:
        _wait_for(lambda: Store.open(f"sqlite:///{db}").counts()["ticks"] >= 3, 60)
        last_at = Store.open(f"sqlite:///{db}").last_tick_at()
        assert last_at is not None
        assert abs((datetime.now(UTC) - last_at).total_seconds()) < 30
        _wait_for(status_healthy, 30)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
