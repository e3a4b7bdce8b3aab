"""`headroom demo` as a user runs it: scripted JSON runs, live services, kill -9 and resume."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from clihelpers import (
    HEADROOM,
    WARM_HEADROOM,
    _env,
    _free_port,
    _wait_for,
    only_failure_document,
    taken_port,
)

from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from protos.externalscaler import externalscaler_pb2 as es
from protos.externalscaler import externalscaler_pb2_grpc as es_grpc
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc


def test_scripted_demo_prints_one_json_summary_with_ticks_and_placements(tmp_path: Path) -> None:
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "120", "--no-dashboard", "--json",
                           "--start", "2026-12-03T08:00:00Z"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["ticks"] > 0 and summary["placements"] > 0
    assert summary["models"] == 6 and summary["gpus"] > 0
    assert summary["sim_minutes"] == 120
    assert summary["sim_start_at"] == "2026-12-03T08:00:00Z"
    assert 0.9 < summary["served_share"] <= 1.0
    assert summary["grpc_address"].startswith("127.0.0.1:")
    # a fleet taken over starts laid out: re-layouts only follow a plan that outgrows it (the
    # morning's growth from 08:00 takes two)
    assert summary["mig_relayouts"] == 2


#: what a run of the demo measures (not when it ran, how long it took or where it served)
MEASURED = ("ticks", "sim_minutes", "sim_start_at", "models", "gpus", "gpus_peak", "placements",
            "forecasts", "served_share", "short_model_minutes_pct", "gpu_hours", "cost_usd",
            "mig_relayouts")


def test_two_scripted_demos_from_one_start_give_the_same_summary(tmp_path: Path) -> None:
    # the traffic is a function of the simulated time of day: runs started at different wall
    # minutes (1, 2 or 3 re-layouts in 120 minutes) saw different traffic. Two at once, each
    # on its own new store: neither the other's load nor the hash seed changes a number
    runs = []
    for name, hash_seed in (("one", "0"), ("two", "random")):
        (tmp_path / name).mkdir()
        env = _env(PYTHONHASHSEED=hash_seed,
                   HEADROOM_FORECAST__STATE_DIR=str(tmp_path / name / "forecaster-state"))
        runs.append(subprocess.Popen([*HEADROOM, "demo", "--minutes", "30", "--no-dashboard",
                                      "--json", "--start", "2026-12-03T12:00:00Z"],
                                     cwd=tmp_path / name, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True))
    summaries = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr
        summary = json.loads(stdout)
        summaries.append({key: summary[key] for key in MEASURED})
    assert summaries[0] == summaries[1]
    assert summaries[0]["mig_relayouts"] >= 1  # the 30 minutes from noon re-lay a node out


def test_a_demo_without_start_starts_at_the_wall_clock_minute(tmp_path: Path) -> None:
    before = datetime.now(UTC).replace(second=0, microsecond=0)
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "0", "--no-dashboard", "--json"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    start_at = datetime.fromisoformat(json.loads(done.stdout)["sim_start_at"])
    assert before <= start_at <= datetime.now(UTC)


def test_ctrl_c_stops_the_live_demo_even_when_it_was_started_with_sigint_ignored(
        tmp_path: Path) -> None:
    grpc_port = _free_port()
    env = _env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{grpc_port}",
               HEADROOM_PLACEMENT__METRICS_LISTEN=f"127.0.0.1:{_free_port()}")
    live = subprocess.Popen(  # as `headroom demo &` from a script: SIGINT arrives ignored
        [*HEADROOM, "demo", "--speed", "120", "--no-dashboard"], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        stub = pb_grpc.PlacementStub(channel)
        _wait_for(lambda: stub.GetPlan(pb.GetPlanRequest(), timeout=2).revision > 0, 60)
        channel.close()
    finally:
        live.send_signal(signal.SIGINT)
        try:
            _, stderr = live.communicate(timeout=60)
        finally:
            live.kill()  # only if SIGINT did not stop it: the test fails below
    assert live.returncode == 0, stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(("args", "env_extra", "expected"), [
    (["--config", "bad.yaml"], {}, "bad.yaml: mystery: unknown key"),
    ([], {"HEADROOM_RECONCILE__INTERVAL_S": "-3"},
     "reconcile.interval_s: Input should be greater than 0"),
    ([], {"HEADROOM_DB__URL": "postgresql://nobody@127.0.0.1:1/none"},
     "cannot reach database postgresql://nobody@127.0.0.1:1/none:"),
    ([], {"HEADROOM_DB__URL": "postgresql://nobody@127.0.0.1:1/none"},
     "(db.url from environment HEADROOM_DB__URL)"),
    ([], {"HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS": '{"serach": 4}'},
     "autoscaling.tenant_gpu_budgets: no model belongs to tenant(s) 'serach'; the models' "
     "tenants are 'acme', 'globex', 'initech'"),
    ([], {"HEADROOM_AUTOSCALING__STATIC_PEAK_RPS": '{"bert-embedd": 600}'},
     "autoscaling.static_peak_rps: no model named 'bert-embedd' (did you mean 'bert-embed'?); "
     "the models are 'bert-embed', 'llama-3-70b', 'llama-3-8b-chat', 'mistral-7b-support', "
     "'resnet50-vision', 'whisper-asr'"),
    (["--db", "postgresql://u@db.example/headroom"], {},
     "--db postgresql:/u@db.example/headroom: takes a SQLite file path, not a URL"),
    ([], {"HEADROOM_FORECAST__STATE_DIR": "bad.yaml/state"},
     "forecast.state_dir bad.yaml/state: cannot write there (Not a directory); set a writable "
     "directory, or null to refit every model on every refresh"),
    (["--start", "tomorrow"], {}, "--start 'tomorrow': not an ISO-8601 time"),
    (["--start", "0001-01-02T00:00:00Z"], {},
     "--start 0001-01-02T00:00:00Z: not in the years the demo simulates (1971 to 9998)"),
], ids=["unknown key", "negative interval", "unreachable database",
        "unreachable database names where its URL came from", "budget of no tenant",
        "peak of no model", "a URL for the --db file", "state dir under a file",
        "--start not a time", "--start out of range"])
def test_bad_configuration_exits_2_with_one_line_and_no_traceback(
        tmp_path: Path, args: list[str], env_extra: dict[str, str], expected: str) -> None:
    (tmp_path / "bad.yaml").write_text("mystery: 1\n")
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "1", "--no-dashboard", "--json",
                           *args], cwd=tmp_path, env=_env(**env_extra), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert expected in done.stderr.replace("\n", "")
    assert "Traceback" not in done.stderr and only_failure_document(done)
    assert not (tmp_path / ".headroom" / "demo.db").exists()  # refused before the store


def test_kill_9_then_restart_resumes_with_earlier_decisions_visible(tmp_path: Path) -> None:
    db = tmp_path / ".headroom" / "demo.db"
    env = _env(HEADROOM_DB__LEASE_DURATION_S="3")  # the restart takes the dead one's lease over
    live = subprocess.Popen([*HEADROOM, "demo", "--no-dashboard", "--speed", "600"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: db.exists() and Store.open(f"sqlite:///{db}").counts()["plans"] >= 5,
                  90)
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait(timeout=10)
    store = Store.open(f"sqlite:///{db}")
    before = store.counts()
    last_at = store.last_tick_at()
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "10", "--no-dashboard", "--json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    after = store.counts()
    assert after["plans"] >= before["plans"] + json.loads(done.stdout)["ticks"] - 1
    assert after["ticks"] > before["ticks"]
    new_last_at = store.last_tick_at()
    assert last_at is not None and new_last_at is not None and new_last_at > last_at


def test_live_demo_serves_grpc_and_dashboard_on_loopback_and_stops_on_ctrl_c(
        tmp_path: Path) -> None:
    grpc_port, dash_port, metrics_port = _free_port(), _free_port(), _free_port()
    env = _env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{grpc_port}",
               HEADROOM_DASHBOARD__PORT=str(dash_port),
               HEADROOM_PLACEMENT__METRICS_LISTEN=f"127.0.0.1:{metrics_port}")
    live = subprocess.Popen([*HEADROOM, "demo", "--speed", "120"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group: its dashboard goes with it
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        stub = pb_grpc.PlacementStub(channel)
        _wait_for(lambda: stub.GetPlan(pb.GetPlanRequest(), timeout=2).revision > 0, 60)
        plan = stub.GetPlan(pb.GetPlanRequest(), timeout=2)
        assert plan.gpus and plan.cost_per_hour > 0
        keda = es_grpc.ExternalScalerStub(channel)
        ref = es.ScaledObjectRef(name="bert", namespace="models",
                                 scalerMetadata={"model": "bert-embed"})
        metrics = keda.GetMetrics(es.GetMetricsRequest(scaledObjectRef=ref), timeout=5)
        assert metrics.metricValues[0].metricValueFloat > 0  # forecast p90 of the demo model
        health = f"http://127.0.0.1:{dash_port}/_stcore/health"
        _wait_for(lambda: urllib.request.urlopen(health, timeout=2).read() == b"ok", 60)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                    timeout=10) as response:
            scraped = response.read().decode()
        applied = re.search(r'^headroom_reconcile_ticks_total{status="applied"} (\S+)$', scraped,
                            re.MULTILINE)
        assert applied is not None and float(applied.group(1)) >= 1  # the series is there at 0
        assert "headroom_fleet_plan_revision" in scraped
        assert 'headroom_model_demand_total{model="bert-embed",reason=' in scraped
        assert 'headroom_model_rps{kind="forecast_p90",model="bert-embed"}' in scraped
        channel.close()
    finally:
        live.send_signal(signal.SIGINT)
        try:
            _, stderr = live.communicate(timeout=60)
        finally:  # nothing of the demo (its dashboard included) outlives the test
            with contextlib.suppress(ProcessLookupError):
                os.killpg(live.pid, signal.SIGKILL)
            live.wait()
    assert live.returncode == 0, stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(("args", "env_extra", "expected"), [
    (["--db", "flag.db"], {"HEADROOM_DB__URL": "sqlite:///{tmp}/env.db"}, "flag.db"),
    (["--config", "store.yaml"], {}, "config.db"),
    (["--config", "store.yaml"], {"HEADROOM_DB__URL": "sqlite:///{tmp}/env.db"}, "env.db"),
    ([], {}, ".headroom/demo.db"),
], ids=["--db beats the environment", "db.url of --config is used",
        "the environment beats --config", "neither: the demo default"])
def test_the_demo_store_is_the_explicit_db_then_the_environment_then_the_config_file(
        tmp_path: Path, args: list[str], env_extra: dict[str, str], expected: str) -> None:
    (tmp_path / "store.yaml").write_text(f"db:\n  url: sqlite:///{tmp_path / 'config.db'}\n")
    env = _env(**{k: v.format(tmp=tmp_path) for k, v in env_extra.items()})
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "1", "--no-dashboard", "--json",
                           *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["db_url"] == f"sqlite:///{tmp_path / expected}"
    stores = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.db")}
    assert stores == {expected}


def test_a_taken_dashboard_port_gives_the_demo_dashboard_another_port(tmp_path: Path) -> None:
    with taken_port() as port:
        env = _env(HEADROOM_DASHBOARD__PORT=str(port))
        done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "1", "--speed", "60", "--json"],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120, start_new_session=True)
    assert done.returncode == 0, done.stderr
    url = json.loads(done.stdout)["dashboard_url"]
    assert url.startswith("http://127.0.0.1:")
    assert url != f"http://127.0.0.1:{port}"  # not the URL of whatever holds the port


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///"])
def test_an_in_memory_store_with_the_dashboard_is_refused_naming_why(tmp_path: Path,
                                                                   url: str) -> None:
    run = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "1"], cwd=tmp_path,
                         env=_env(HEADROOM_DB__URL=url), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    assert run.stderr == (f"error: db.url {url}: the dashboard runs in its own process and "
                          "cannot see an in-memory database; use sqlite:///FILE (or --db), or "
                          "--no-dashboard\n")
    assert list(tmp_path.iterdir()) == []  # no log, no store, no dashboard started


@pytest.mark.parametrize("minutes", ["0.5", "1.5"])
def test_a_run_of_a_fraction_of_a_minute_counts_its_last_gpus_in_the_peak(
        tmp_path: Path, minutes: str) -> None:
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", minutes, "--no-dashboard",
                           "--json"], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["sim_minutes"] == float(minutes)
    assert summary["gpus"] > 0 and summary["gpus_peak"] >= summary["gpus"]


def test_a_corrupt_default_store_is_refused_in_one_line_that_does_not_blame_the_command_line(
        tmp_path: Path) -> None:
    store = tmp_path / ".headroom" / "demo.db"
    store.parent.mkdir()
    store.write_bytes(b"not a database, just some garbage\n" * 200)
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "1", "--no-dashboard", "--json"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.replace("\n", "").endswith(
        "file is not a database (not a Headroom store, or damaged: move the file aside, and "
        "`headroom db upgrade`, `demo` or `serve` makes a new store in its place) (db.url from "
        "the demo's default)")
    assert "Traceback" not in done.stderr and only_failure_document(done)
    assert store.read_bytes() == b"not a database, just some garbage\n" * 200  # left as it was


def test_a_taken_placement_port_gives_the_demo_another_port_without_a_grpc_error_line(
        tmp_path: Path) -> None:
    with taken_port() as port:
        env = _env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{port}")
        done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "1", "--no-dashboard",
                               "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 0, done.stderr
    address = json.loads(done.stdout)["grpc_address"]
    assert address.startswith("127.0.0.1:") and address != f"127.0.0.1:{port}"
    assert "Failed to add port" not in done.stderr, done.stderr  # a taken port is no error


def test_a_demo_stopped_before_its_first_tick_leaves_a_store_the_next_run_backfills_once(
        tmp_path: Path) -> None:
    for minutes in ("0", "1"):  # --minutes 0 (or Ctrl-C while starting): a store, no tick
        done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", minutes, "--no-dashboard",
                               "--json"], cwd=tmp_path, env=_env(), capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    with contextlib.closing(sqlite3.connect(tmp_path / ".headroom" / "demo.db")) as store:
        rows, instants = store.execute(
            "SELECT count(*), count(DISTINCT model || at) FROM observations").fetchone()
    assert rows == instants > 0  # the synthetic history is not stored twice


def test_ctrl_c_while_the_demo_starts_stops_it_cleanly_and_gives_the_fleet_lease_up(
        tmp_path: Path) -> None:
    db = tmp_path / ".headroom" / "demo.db"
    def lease_held() -> bool:
        with contextlib.closing(sqlite3.connect(db, timeout=0.2)) as store:
            return bool(store.execute("SELECT holder FROM leases").fetchone()[0])
    run = subprocess.Popen([*HEADROOM, "demo", "--minutes", "100000", "--no-dashboard",
                            "--json"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lease_held, 60)  # the lease is taken first, before the store's history
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert json.loads(stdout)["sim_minutes"] < 100000
    assert not lease_held()  # the next demo need not wait for it to run out


@pytest.mark.parametrize("speed", ["inf", "1e12", "10001"])
def test_a_speed_past_what_the_live_demo_can_pace_is_refused_naming_the_option(
        tmp_path: Path, speed: str) -> None:
    # inf stood simulated time still; 1e12 ran the clock past year 9999 and never stopped
    done = subprocess.run([*WARM_HEADROOM, "demo", "--no-dashboard", "--speed", speed],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--speed" in done.stderr and "10000" in done.stderr, done.stderr
    assert not (tmp_path / ".headroom").exists()  # refused before the store


def test_a_one_minute_demo_ends_with_a_line_that_counts_one_minute_in_the_singular(
        tmp_path: Path) -> None:
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "1", "--no-dashboard",
                           "--start", "2026-12-03T08:00:00Z"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())  # on stderr, wrapped at the terminal's width
    assert "stopped after 1 simulated minute: " in said
    for count, noun in re.findall(r"(\d+) (ticks?|placements?|GPUs?|MIG re-layouts?)(?=,|$)", said):
        assert noun.endswith("s") == (count != "1"), said


def test_a_store_path_that_looks_like_rich_markup_is_named_as_written(tmp_path: Path) -> None:
    db = tmp_path / "[bold]d.db"
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "0", "--no-dashboard", "--db",
                           str(db)], cwd=tmp_path, env=_env(COLUMNS="400"), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"Headroom demo store sqlite:///{db}\n" in done.stderr  # before: ".../d.db"


def test_a_store_that_lists_a_real_fleets_models_is_refused_and_left_as_it_was(
        tmp_path: Path) -> None:
    db = tmp_path / "fleet.db"
    store = Store.open(f"sqlite:///{db}", migrate=True)
    imported = replace(DEMO_MODELS[0], name="team/gpt-prod")
    store.upsert_models([imported, replace(DEMO_MODELS[0], latency_slo_ms=2000.0)])
    store.engine.dispose()
    done = subprocess.run([*WARM_HEADROOM, "demo", "--db", str(db), "--minutes", "1",
                           "--no-dashboard", "--json"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and only_failure_document(done)
    line = done.stderr.replace("\n", "")
    assert "lists models the simulated fleet does not run (team/gpt-prod): a real fleet's store" \
        in line and "give them one of their own (--db, or db.url)" in line, done.stderr
    assert "Traceback" not in done.stderr
    after = Store.open(f"sqlite:///{db}")
    try:  # nothing written: the imported models as they were, no tick, no observation
        assert sorted((s.name, s.latency_slo_ms) for s in after.model_specs()) == [
            ("llama-3-8b-chat", 2000.0), ("team/gpt-prod", 400.0)]
        assert after.last_tick_at() is None
        assert after.last_observed_at("llama-3-8b-chat") is None
    finally:
        after.engine.dispose()
