"""`headroom status` as a probe runs it: over a store the real sim runtime filled, read-only,
exit 0 when the loop is healthy, 1 when it is not (saying why), 2 when the store cannot be read."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sqlite3
import subprocess
import time
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from clihelpers import WARM_HEADROOM, _env
from sqlmodel import Session, col, select

from controlplane.adapters.clock import WallClock
from controlplane.autoscaling.issued import accuracy
from controlplane.domain.actions import ActionOutcome, ScaleNodePool, SetReplicas, SkippedAction
from controlplane.domain.errors import PermanentError
from controlplane.domain.guards import GuardMemory
from controlplane.domain.lease import LeaseRecord, released
from controlplane.domain.mig_layout import layout_from_entries
from controlplane.domain.mig_relayout import MigRelayout, RelayoutPhase
from controlplane.domain.observed import ObservedModel, ObservedPool, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.plan import Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.fleet_lease import FLEET_LEASE
from controlplane.identity import holder_identity
from controlplane.placement_api import journaled_engine
from controlplane.reconcile import SOURCE_REJECTED, reconcile_once
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.lease import SqlLeaseStore
from controlplane.store.ledger import SqlForecastLedger
from controlplane.store.relayout import SqlRelayoutStore
from controlplane.store.tables import ActionRecord, PlanRecord
from protos.headroom.v1 import placement_pb2 as pb
from tests.stallproxy import StallProxy

LONG_AGO = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class ForbiddenReader:
    def snapshot(self) -> ObservedState:
        raise PermanentError("HTTP 403: nodes is forbidden")


def _status(url: str, *args: str, env_columns: str = "80") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, "status", *args],
                          env=_env(HEADROOM_DB__URL=url, COLUMNS=env_columns),
                          capture_output=True, text=True, timeout=120)


def _json_status(url: str, *args: str) -> tuple[int, dict[str, Any]]:
    run = _status(url, "--json", *args)
    assert "Traceback" not in run.stderr, run.stderr
    return run.returncode, json.loads(run.stdout)


def _filled(url: str, start_at: datetime, minutes: float) -> SimRuntime:
    """A store the sim runtime (virtual clock from ``start_at``) ran ``minutes`` on."""
    settings = load_settings(db={"url": url}, sim={"history_s": 6 * 3600})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), start_at)
    runtime.advance(minutes * 60)
    return runtime


def _recent(url: str) -> SimRuntime:
    """Ten simulated minutes ending just before the wall clock's now."""
    now = WallClock().now()
    start_at = (now - timedelta(minutes=10)).replace(second=0, microsecond=0)
    return _filled(url, start_at, (now - start_at).total_seconds() / 60 - 0.5)


def test_status_of_a_running_fleet_is_healthy_and_shows_what_the_store_holds(
        sqlite_url: str) -> None:
    runtime = _recent(sqlite_url)
    store = runtime.store
    SqlLeaseStore(store.engine).create_lease(FLEET_LEASE, LeaseRecord(
        "host-a-123", 15, WallClock().now(), WallClock().now(), 2))
    code, doc = _json_status(sqlite_url, "--max-tick-age-s", "600")
    assert code == 0 and doc["healthy"] is True and doc["problems"] == []
    observed = store.last_observed()
    assert observed is not None
    assert doc["last_tick"]["id"] == store.counts()["ticks"] == doc["last_tick"]["ticks_stored"]
    assert doc["last_tick"]["status"] == "applied"
    assert doc["last_tick"]["started_at"] == observed.synced_at.isoformat().replace("+00:00", "Z")
    assert 0 <= doc["last_tick"]["age_s"] < 600
    assert {m["name"] for m in doc["models"]} == {m.name for m in DEMO_MODELS}
    forecasts = store.latest_forecasts()
    for shown in doc["models"]:
        seen = observed.model(shown["name"])
        assert seen is not None
        assert (shown["replicas_ready"], shown["replicas_pending"], shown["replicas_target"]) == (
            seen.replicas_ready, seen.replicas_pending, seen.replicas_target)
        # the simulated fleet reports the pods no node has bound
        assert seen.replicas_unscheduled is not None
        assert shown["replicas_unscheduled"] == seen.replicas_unscheduled
        assert shown["observed_rps"] == seen.demand_rps
        assert shown["capacity_rps"] == seen.capacity_rps
        forecast = forecasts[shown["name"]]
        assert shown["forecast"]["p50_rps"] == forecast.p50[1200 // forecast.step_s - 1]
        assert shown["forecast"]["p90_rps"] == forecast.p90[1200 // forecast.step_s - 1]
        assert shown["forecast"]["method"] == forecast.method
        assert shown["forecast"]["ahead_s"] == 1200
    assert [(p["name"], p["nodes_ready"], p["nodes_pending"], p["target_nodes"])
            for p in doc["pools"]] == [(p.name, p.nodes_ready, p.nodes_pending, p.target_nodes)
                                       for p in observed.pools]
    prices = {p.name: p.price_per_gpu_hour for p in runtime.config.pools}
    assert {p["name"]: p["price_per_gpu_hour"] for p in doc["pools"]} == prices
    with Session(store.engine) as session:
        plan = session.exec(select(PlanRecord).order_by(col(PlanRecord.id).desc())).first()
        assert plan is not None
        rows = session.exec(select(ActionRecord).where(ActionRecord.plan_id == plan.id)
                            .order_by(col(ActionRecord.ordinal))).all()
    assert (doc["plan"]["id"], doc["plan"]["revision"]) == (plan.id, plan.revision)
    assert [(a["target"], a["to"]) for a in doc["plan"]["actions"]] == [
        (r.target, r.to_value) for r in rows if not r.skipped]
    assert [(h["target"], h["reason"]) for h in doc["plan"]["held"]] == [
        (r.target, r.reason) for r in rows if r.skipped]
    assert doc["lease"]["holder"] == "host-a-123" and doc["lease"]["duration_s"] == 15
    profiles = store.last_profiles()
    assert {p.model for p in profiles} == {m.name for m in DEMO_MODELS}
    assert [(p["model"], p["offline_rps"], p["corrected_rps"], p["reason"])
            for p in doc["profiles"]] == [
        (c.model, c.offline_rps, c.corrected_rps, c.reason) for c in profiles]
    table = _status(sqlite_url, "--max-tick-age-s", "600")
    assert table.returncode == 0
    assert "host-a-123" in table.stdout
    for model in DEMO_MODELS:  # at 80 columns too, a model's name is never broken
        assert f"\n{model.name} " in table.stdout
    corrected = any(c.is_corrected for c in profiles)
    assert ("Profiles corrected online" in table.stdout) is corrected
    assert table.stdout.rstrip().endswith("healthy")


def test_status_shows_how_each_models_forecasts_did_over_the_hour_before_the_last_tick(
        sqlite_url: str) -> None:
    runtime = _filled(sqlite_url, LONG_AGO, 65)
    last = runtime.store.last_observed()
    assert last is not None
    since_at = last.synced_at - timedelta(hours=1)
    expected = {a.model: a for a in accuracy(
        SqlForecastLedger(runtime.store.engine).issued_since(since_at), since_at)}
    assert set(expected) == {m.name for m in DEMO_MODELS}
    _, doc = _json_status(sqlite_url)
    for shown in doc["models"]:
        want = expected[shown["name"]]
        assert want.scored >= 6
        assert shown["forecast_accuracy"] == {"window_s": 3600.0, "scored": want.scored,
                                              "wape_ratio": want.wape,
                                              "p90_coverage": want.p90_coverage}
    table = _status(sqlite_url).stdout
    assert "Forecasts over the last hour" in table
    for model in DEMO_MODELS:
        want = expected[model.name]
        assert want.wape is not None
        assert f"{want.wape:.1%}" in table.split("Forecasts over the last hour", 1)[1]


def _relayout(node: str, phase: RelayoutPhase, at: datetime) -> MigRelayout:
    layout = layout_from_entries("A100-80GB", [{"devices": "all", "mig-enabled": True,
                                                "mig-devices": {"3g.40gb": 2}}])
    return MigRelayout(f"{node}-1", node, "a100-80gb", "all-disabled", "headroom-2x3g.40gb",
                       layout, phase, at, at, wait_reason="pods draining")


def test_the_last_plan_shows_its_outcomes_the_changes_held_back_and_relayouts_in_flight(
        sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    at = WallClock().now() - timedelta(seconds=20)
    observed = ObservedState(at, (ObservedPool("l4", "L4", 4, 1, 1, 2),), (),
                             (ObservedModel("bert-embed", 2, 1, 3, 0.0, 600.0, False),),
                             notes=("bert-embed: no series",))
    placement = FleetPlacement(
        revision=7, segments=(PlacedSegment("bert-embed", "L4-0", "L4", "exclusive", "", 0, 0,
                                            300.0),),
        gpu_ids_by_product=(("L4", ("L4-0",)),), warm_pools=(), cost_per_hour=1.6, unplaced=())
    plan = Plan(at, (ScaleNodePool("l4", 1, 2, "placement"),
                     SetReplicas("bert-embed", 2, 3, "p90")),
                (SkippedAction("l4", 5, 2, "max_step"),))
    store.save_tick(TickReport(at, at, TickStatus.APPLIED, "", observed, (), placement, plan, (
        ActionOutcome("l4", True, "ok"), ActionOutcome("bert-embed", False, "HTTP 409: conflict")),
        GuardMemory()))
    relayouts = SqlRelayoutStore(store.engine)
    relayouts.save_relayout(_relayout("a100-0", RelayoutPhase.DRAIN, at))
    relayouts.save_relayout(_relayout("a100-1", RelayoutPhase.DONE, at))
    code, doc = _json_status(sqlite_url)
    assert code == 0
    assert doc["plan"]["revision"] == 7 and doc["plan"]["cost_per_hour"] == 1.6
    assert doc["plan"]["actions"] == [
        {"kind": "scale_node_pool", "target": "l4", "from": 1, "to": 2, "reason": "placement",
         "ok": True, "message": "ok"},
        {"kind": "set_replicas", "target": "bert-embed", "from": 2, "to": 3, "reason": "p90",
         "ok": False, "message": "HTTP 409: conflict"}]
    assert doc["plan"]["held"] == [{"target": "l4", "kept": 2, "wanted": 5, "reason": "max_step"}]
    assert [(r["node"], r["phase"], r["wait_reason"]) for r in doc["relayouts"]] == [
        ("a100-0", "drain", "pods draining")]
    (model,) = doc["models"]
    assert (model["observed_rps"], model["demand_measured"], model["capacity_rps"]) == (
        None, False, 600.0)
    assert model["queued_requests"] is None  # the queue was not read
    assert model["kv_cache_usage"] is None  # nor the KV cache
    assert doc["last_tick"]["notes"] == ["bert-embed: no series"]
    assert doc["pools"] == [{"name": "l4", "product": "L4", "gpus_per_node": 4, "nodes_ready": 1,
                             "nodes_pending": 1, "target_nodes": 2, "price_per_gpu_hour": None,
                             "price_source": ""}]
    table = _status(sqlite_url, env_columns="200")
    assert "HTTP 409: conflict" in table.stdout and "max_step" in table.stdout
    assert "a100-0" in table.stdout and "a100-1" not in table.stdout


def test_a_stale_last_tick_exits_1_naming_its_age_and_the_limit(sqlite_url: str) -> None:
    _filled(sqlite_url, LONG_AGO, 3)  # the default limit: 3 x reconcile.interval_s (30 s)
    code, doc = _json_status(sqlite_url)
    assert code == 1 and doc["healthy"] is False
    assert [p["code"] for p in doc["problems"]] == ["stale_tick"]
    assert doc["max_tick_age_s"] == 90.0 and doc["last_tick"]["age_s"] > 90
    assert "more than 90 s" in doc["problems"][0]["message"]
    table = _status(sqlite_url)
    assert table.returncode == 1
    assert table.stdout.splitlines()[-1].startswith("unhealthy: the last tick (#")


def test_a_last_tick_from_the_future_exits_1_unless_a_simulated_fleet_drives_the_store(
        sqlite_url: str) -> None:
    """A replica whose clock runs an hour ahead wrote the last tick and stopped: the probe must
    not call the loop alive for the next hour. A demo's simulated clock may run ahead."""
    _filled(sqlite_url, WallClock().now() + timedelta(hours=1), 3)
    code, doc = _json_status(sqlite_url)
    assert code == 1 and doc["healthy"] is False
    assert [p["code"] for p in doc["problems"]] == ["future_tick"]
    assert "after this clock's now, more than 90 s" in doc["problems"][0]["message"]
    assert doc["last_tick"]["age_s"] < -3000
    store = Store.open(sqlite_url)
    SqlLeaseStore(store.engine).create_lease(FLEET_LEASE, LeaseRecord(
        "demo-host-1", 15, WallClock().now(), WallClock().now(), 1))
    store.engine.dispose()
    code, doc = _json_status(sqlite_url)
    assert code == 0 and doc["healthy"] is True


def test_a_running_demo_days_behind_the_wall_clock_is_healthy_until_its_lease_is_released(
        sqlite_url: str) -> None:
    """A demo started with --start 3 days ago ticks on its simulated clock, days behind the
    wall clock, and renews its sim-fleet lease by the wall clock: status called it dead. Once
    it stops (its lease released) its old ticks are stale again."""
    runtime = _filled(sqlite_url, WallClock().now() - timedelta(days=3), 3)
    leases = SqlLeaseStore(runtime.store.engine)
    now = WallClock().now()
    assert leases.create_lease(FLEET_LEASE, LeaseRecord("demo-host-1", 15, now, now, 0))

    def renewed() -> LeaseRecord:  # as the demo's lease job does every few seconds
        held = leases.read_lease(FLEET_LEASE)
        assert held is not None
        assert leases.replace_lease(FLEET_LEASE, replace(held, renew_at=WallClock().now()))
        again = leases.read_lease(FLEET_LEASE)
        assert again is not None
        return again

    renewed()
    code, doc = _json_status(sqlite_url)
    assert code == 0 and doc["healthy"] is True, doc["problems"]
    assert doc["judged_by"] == "lease" and doc["last_tick"]["age_s"] > 2 * 86400
    held = renewed()
    table = _status(sqlite_url, env_columns="200")
    assert table.returncode == 0
    assert re.search(r"last tick +│ #\d+ at \S+ \([\d,]+ s ago; on the simulated fleet's "
                     r"clock: judged by lease sim-fleet, renewed \d+ s ago; max 90 s\)",
                     table.stdout), table.stdout

    assert leases.replace_lease(FLEET_LEASE, released(held, WallClock().now()))
    runtime.store.engine.dispose()
    code, doc = _json_status(sqlite_url)
    assert code == 1 and doc["judged_by"] == "last_tick"
    assert [p["code"] for p in doc["problems"]] == ["stale_tick"]
    assert "s ago, more than 90 s" in doc["problems"][0]["message"]


def test_a_failed_last_tick_exits_1_with_its_reason_and_the_fleet_last_seen(
        sqlite_url: str) -> None:
    runtime = _recent(sqlite_url)
    seen_by = runtime.store.counts()["ticks"]
    seen = runtime.store.last_observed()
    reconcile_once(replace(runtime.deps, reader=ForbiddenReader()), runtime.config)
    code, doc = _json_status(sqlite_url, "--max-tick-age-s", "600")
    assert code == 1
    assert [p["code"] for p in doc["problems"]] == ["failed_tick"]
    assert doc["last_tick"]["status"] == "failed" and doc["last_tick"]["reason"] == SOURCE_REJECTED
    assert doc["last_tick"]["id"] == seen_by + 1 and doc["last_tick"]["synced"] is False
    assert SOURCE_REJECTED in doc["problems"][0]["message"]
    assert doc["last_tick"]["notes"] == ["HTTP 403: nodes is forbidden"]
    assert seen is not None and doc["fleet"]["tick_id"] == seen_by
    assert {m["name"]: m["replicas_ready"] for m in doc["models"]} == {
        m.name: m.replicas_ready for m in seen.models}
    table = _status(sqlite_url, "--max-tick-age-s", "600", env_columns="200")
    assert f"by tick #{seen_by} at " in table.stdout
    assert table.stdout.splitlines()[-1] == (
        f"unhealthy: the last tick (#{seen_by + 1}) failed: {SOURCE_REJECTED}")


def test_the_default_tick_age_limit_is_three_reconcile_intervals_of_the_config_file(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'headroom.db'}"
    now = WallClock().now()
    start_at = (now - timedelta(minutes=20)).replace(second=0, microsecond=0)
    _filled(url, start_at, 5).store.engine.dispose()  # the last tick: about 15 minutes ago
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: {url}\nreconcile:\n  interval_s: 600\n"
                      "  max_staleness_s: 600\n", encoding="utf-8")
    run = subprocess.run([*WARM_HEADROOM, "status", "--json", "--config", str(config)], env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["max_tick_age_s"] == 1800.0
    assert _status(url).returncode == 1  # the default reconcile.interval_s: 30 s


def test_a_stored_forecast_holding_nan_or_infinity_is_null_in_the_json_not_invalid_json(
        sqlite_url: str) -> None:
    runtime = _recent(sqlite_url)
    model = DEMO_MODELS[0].name
    made = runtime.store.latest_forecasts()[model]
    runtime.store.save_forecasts([replace(made, p50=(math.nan,) * len(made.p50),
                                          p90=(math.inf,) * len(made.p90))], WallClock().now())
    run = _status(sqlite_url, "--json", "--max-tick-age-s", "600")
    assert "Traceback" not in run.stderr, run.stderr

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    doc = json.loads(run.stdout, parse_constant=refuse)
    (shown,) = [m for m in doc["models"] if m["name"] == model]
    assert (shown["forecast"]["p50_rps"], shown["forecast"]["p90_rps"]) == (None, None)
    assert shown["forecast"]["ahead_s"] == 1200


def test_a_model_name_wider_than_the_terminal_folds_and_leaves_every_rows_numbers_shown(
        sqlite_url: str) -> None:
    long_name = "org-team/" + "very-long-model-name-" * 8 + "v1"
    _recent(sqlite_url)  # the demo's fleet (which refuses a store listing other models), then
    Store.open(sqlite_url).upsert_models([replace(DEMO_MODELS[0], name=long_name)])
    text = _status(sqlite_url, "--max-tick-age-s", "600", env_columns="80").stdout
    chat = next(line for line in text.splitlines()  # its row of the Models table
                if line.startswith("llama-3-8b-chat "))
    assert re.search(r"\d+/\d+/\d+", chat), chat  # its replicas (before: every column but the name
    lines = text.splitlines()                       # was squeezed to nothing, the long name cut)
    start = next(i for i, line in enumerate(lines) if line.startswith("org-team/"))
    shown = lines[start].split("│")[0].strip()
    for line in lines[start + 1:]:  # the name folded over the next lines, the other cells empty
        first, *rest = line.split("│")
        if any(cell.strip() for cell in rest) or not first.strip():
            break
        shown += first.strip()
    assert shown == long_name


def test_a_store_without_ticks_exits_1_saying_so(sqlite_url: str) -> None:
    Store.open(sqlite_url, migrate=True).engine.dispose()
    code, doc = _json_status(sqlite_url)
    assert code == 1 and doc["last_tick"] is None and doc["plan"] is None
    assert doc["problems"] == [{"code": "no_tick",
                                "message": f"store {sqlite_url} has no reconcile tick yet"}]


def test_a_missing_sqlite_file_exits_2_in_one_line_and_creates_nothing(tmp_path: Path) -> None:
    store_file = tmp_path / "absent" / "headroom.db"
    run = _status(f"sqlite:///{store_file}")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == (f"error: store sqlite:///{store_file}: no such database file "
                          "(db.url from environment HEADROOM_DB__URL); run `headroom db "
                          "upgrade` to create it (or start `headroom demo` with the same "
                          "db.url)\n")
    assert not store_file.parent.exists()


def test_a_database_without_the_schema_exits_2_naming_the_url(tmp_path: Path) -> None:
    store_file = tmp_path / "empty.db"
    sqlite3.connect(store_file).close()
    run = _status(f"sqlite:///{store_file}")
    assert run.returncode == 2
    assert run.stderr == (f"error: store sqlite:///{store_file} has no Headroom schema; run "
                          "`headroom db upgrade` (or start `headroom demo` with the same "
                          "db.url)\n")


def test_an_unreachable_postgresql_exits_2_in_one_line_naming_the_url() -> None:
    url = "postgresql://status@127.0.0.1:1/headroom"
    run = _status(url)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith(f"error: cannot reach database {url}: ")
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr



@pytest.mark.postgres
def test_a_postgresql_store_whose_network_stalls_exits_2_within_the_response_timeout(
        postgres_url: str) -> None:
    Store.open(postgres_url, migrate=True).engine.dispose()
    with closing(StallProxy(("127.0.0.1", 5432))) as proxy:
        url = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
        proxy.stall_on(b"ticks")  # its first read, of the schema
        run = subprocess.run([*WARM_HEADROOM, "status"], capture_output=True, text=True, timeout=60,
                             env=_env(HEADROOM_DB__URL=url, HEADROOM_DB__RESPONSE_TIMEOUT_S="2"))
        exited_at = time.monotonic()
    # well before a stalled socket's own timeouts (minutes): 2 s plus the exit, slow on a loaded CI
    assert proxy.stalled_at is not None and exited_at - proxy.stalled_at < 2 + 8
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == (f"error: store {url}: no answer from the database server at "
                          f"127.0.0.1:{proxy.port} within 2 s (db.response_timeout_s): a "
                          "stalled network or load balancer?\n")


def test_db_names_the_sqlite_store_to_read_and_beats_the_environment(tmp_path: Path) -> None:
    store_file = tmp_path / ".headroom" / "demo.db"
    store_file.parent.mkdir()
    _recent(f"sqlite:///{store_file}").store.engine.dispose()
    elsewhere = f"sqlite:///{tmp_path / 'absent.db'}"
    code, doc = _json_status(elsewhere, "--db", str(store_file), "--max-tick-age-s", "600")
    assert code == 0 and doc["store"] == f"sqlite:///{store_file}"
    url = _status(elsewhere, "--db", "postgresql://u@db.example/headroom")
    assert url.returncode == 2 and "Traceback" not in url.stderr
    assert url.stderr.startswith("error: --db postgresql:/u@db.example/headroom: takes a "
                                 "SQLite file path, not a URL")


def test_a_missing_default_store_beside_a_demo_store_says_to_pass_db(tmp_path: Path) -> None:
    demo_store = tmp_path / ".headroom" / "demo.db"
    demo_store.parent.mkdir()
    sqlite3.connect(demo_store).close()
    run = subprocess.run([*WARM_HEADROOM, "status"], env=_env(), cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == ("error: store sqlite:///headroom.db: no such database file (db.url "
                          "from the default); `headroom demo` keeps its store in "
                          ".headroom/demo.db: pass --db .headroom/demo.db\n")
    assert not (tmp_path / "headroom.db").exists()

def _fingerprint(store_file: Path) -> tuple[str, int]:
    return hashlib.sha256(store_file.read_bytes()).hexdigest(), store_file.stat().st_mtime_ns


def test_status_leaves_the_sqlite_file_and_its_journal_mode_as_they_were(
        tmp_path: Path) -> None:
    store_file = tmp_path / "headroom.db"
    runtime = _recent(f"sqlite:///{store_file}")
    runtime.store.engine.dispose()
    with sqlite3.connect(store_file) as connection:  # a rollback-journal store: no WAL to make
        connection.execute("PRAGMA journal_mode=DELETE")
    before = _fingerprint(store_file)
    for args in ((), ("--json",)):
        assert _status(f"sqlite:///{store_file}", "--max-tick-age-s", "600",
                       *args).returncode == 0
    assert _fingerprint(store_file) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("headroom.db")) == [
        "headroom.db"]
    with sqlite3.connect(f"file:{store_file}?mode=ro", uri=True) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The document without what differs between two stores filled alike: the URL and the
    wall-clock instants of the check."""
    drop = {"store", "checked_at"}
    return {**{k: v for k, v in doc.items() if k not in drop},
            "last_tick": {k: v for k, v in doc["last_tick"].items() if k != "age_s"},
            "problems": [{**p, "message": p["message"].split(" started ")[0]}
                         for p in doc["problems"]]}


@pytest.mark.postgres
def test_status_on_postgresql_gives_the_same_document_as_on_sqlite(
        sqlite_url: str, postgres_url: str) -> None:
    for url in (sqlite_url, postgres_url):
        _filled(url, LONG_AGO, 4).store.engine.dispose()
    (sqlite_code, on_sqlite), (pg_code, on_pg) = (_json_status(sqlite_url),
                                                  _json_status(postgres_url))
    assert sqlite_code == pg_code == 1  # LONG_AGO: stale on both
    assert on_pg["store"] == postgres_url
    assert len(on_pg["models"]) == len(DEMO_MODELS) and on_pg["plan"] is not None
    assert _comparable(on_pg) == _comparable(on_sqlite)


def test_status_shows_the_placement_journal_the_placement_servers_follow(
        sqlite_url: str) -> None:
    _recent(sqlite_url)
    engine = journaled_engine(Store.open(sqlite_url), WallClock())
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(
        name=name, cpu_milli=8000, memory_mib=65_536, pool="L4",
        gpus=[pb.Gpu(index=0, product="L4", memory_mib=23_034)]) for name in ("n0", "n1")]))
    for workload in ("w0", "w1", "w2"):
        engine.place(pb.PlaceRequest(workload_id=workload, model="m", tenant="t", num_gpu=1,
                                     gpu_milli=300, cpu_milli=100, memory_mib=128))
    engine.release(pb.ReleaseRequest(workload_id="w2"))
    code, doc = _json_status(sqlite_url)
    assert code == 0
    placement = doc["placement"]
    assert (placement["bindings"], placement["journal_version"], placement["plan_revision"]) == (
        2, 4, 0)
    assert placement["nodes"] in (1, 2) and placement["changed_by"] == holder_identity()
    text = _status(sqlite_url, env_columns="200").stdout
    assert (f"2 binding(s) on {placement['nodes']} node(s), plan revision 0; journal version 4, "
            "changed ") in text and f"s ago by {holder_identity()}" in text


def _bert_read_at_600_rps(sqlite_url: str, queued_requests: float | None = None,
                          kv_cache_usage: float | None = None,
                          latency_ms: float | None = None,
                          demand_measured: bool = True,
                          queue_growth_rps: float | None = None) -> dict[str, Any]:
    """The status JSON's model after one tick read bert-embed finishing 600 rps (or could not
    measure its load), with its queue, its growth, its KV cache usage and its latency."""
    store = Store.open(sqlite_url, migrate=True)
    at = WallClock().now() - timedelta(seconds=20)
    observed = ObservedState(at, (ObservedPool("l4", "L4", 4, 1, 0, 1),), (),
                             (ObservedModel("bert-embed", 2, 0, 2, 600.0, 600.0,
                                            queued_requests=queued_requests,
                                            kv_cache_usage=kv_cache_usage,
                                            latency_ms=latency_ms,
                                            queue_growth_rps=queue_growth_rps,
                                            demand_measured=demand_measured),))
    store.save_tick(TickReport(at, at, TickStatus.APPLIED, "", observed, (), None,
                               Plan(at, (), ()), (), GuardMemory()))
    _, doc = _json_status(sqlite_url)
    (model,) = doc["models"]
    return dict(model)


def test_a_models_queued_requests_show_beside_its_rate(sqlite_url: str) -> None:
    model = _bert_read_at_600_rps(sqlite_url, queued_requests=7200.0)
    assert (model["observed_rps"], model["queued_requests"]) == (600.0, 7200.0)
    assert "600.0 +7,200 queued" in _status(sqlite_url, env_columns="200").stdout


def test_a_saturated_models_rate_is_what_arrived_what_finished_plus_its_queues_growth(
        sqlite_url: str) -> None:
    model = _bert_read_at_600_rps(sqlite_url, queued_requests=7200.0, queue_growth_rps=40.0)
    assert (model["observed_rps"], model["capacity_rps"]) == (640.0, 600.0)
    assert "640.0 +7,200 queued" in _status(sqlite_url, env_columns="200").stdout


def test_a_models_kv_cache_usage_shows_beside_its_rate(sqlite_url: str) -> None:
    model = _bert_read_at_600_rps(sqlite_url, kv_cache_usage=0.934)
    assert (model["observed_rps"], model["kv_cache_usage"]) == (600.0, 0.934)
    assert "600.0 kv 93%" in _status(sqlite_url, env_columns="200").stdout


@pytest.mark.parametrize(("latency_ms", "said"), [
    (52.0, "bert-embed: latency 52 ms, above its SLO of 40 ms (headroom_model_latency_ms; the "
           "loop corrects its profile from it)"),
    (40.0, None)])  # at the SLO: within it
def test_a_models_latency_above_its_slo_is_said_under_the_models_table(
        sqlite_url: str, latency_ms: float, said: str | None) -> None:
    (bert,) = [m for m in DEMO_MODELS if m.name == "bert-embed"]  # SLO 40 ms
    Store.open(sqlite_url, migrate=True).upsert_models([bert])
    model = _bert_read_at_600_rps(sqlite_url, latency_ms=latency_ms)
    assert (model["latency_ms"], model["latency_slo_ms"]) == (latency_ms, 40.0)
    lines = [line for line in _status(sqlite_url, env_columns="200").stdout.splitlines()
             if "SLO" in line]
    assert lines == ([] if said is None else [said])


def test_a_model_not_listed_has_its_latency_in_the_json_without_an_slo(sqlite_url: str) -> None:
    model = _bert_read_at_600_rps(sqlite_url, latency_ms=380.0)
    assert (model["latency_ms"], model["latency_slo_ms"]) == (380.0, None)
    assert "SLO" not in _status(sqlite_url, env_columns="200").stdout


SLO_CASES = [
    ({}, "ok", []),  # 600 rps of demand on 600 rps of capacity: within it
    ({"queued_requests": 600.0 * 30 + 1}, "short", ["queue"]),
    ({"queued_requests": 600.0 * 30}, "ok", []),
    ({"kv_cache_usage": 0.96, "latency_ms": 52.0}, "short", ["kv_cache", "latency"])]


@pytest.mark.parametrize(("signals", "status", "reasons"), SLO_CASES)
def test_the_json_says_whether_each_model_is_short_of_its_slo_and_why(
        sqlite_url: str, signals: dict[str, Any], status: str, reasons: list[str]) -> None:
    (bert,) = [m for m in DEMO_MODELS if m.name == "bert-embed"]  # SLO 40 ms
    Store.open(sqlite_url, migrate=True).upsert_models([bert])
    model = _bert_read_at_600_rps(sqlite_url, **signals)
    assert (model["slo_status"], model["short_of_slo"]) == (status, reasons)


@pytest.mark.parametrize(("signals", "status", "reasons"), SLO_CASES)
def test_the_models_tables_slo_column_says_what_the_json_says(
        sqlite_url: str, signals: dict[str, Any], status: str, reasons: list[str]) -> None:
    (bert,) = [m for m in DEMO_MODELS if m.name == "bert-embed"]  # SLO 40 ms
    Store.open(sqlite_url, migrate=True).upsert_models([bert])
    _bert_read_at_600_rps(sqlite_url, **signals)
    text = _status(sqlite_url, env_columns="200").stdout
    header = next(line for line in text.splitlines() if line.startswith("model "))
    row = next(line for line in text.splitlines() if line.startswith("bert-embed "))
    assert [cell.strip() for cell in header.split("┃")][-1] == "slo"
    said = status + (": " + ", ".join(reasons) if reasons else "")
    assert [cell.strip() for cell in row.split("│")][-1] == said


def test_a_model_whose_load_the_tick_did_not_measure_is_unknown_in_the_slo_column(
        sqlite_url: str) -> None:
    model = _bert_read_at_600_rps(sqlite_url, demand_measured=False)
    assert (model["demand_measured"], model["slo_status"]) == (False, "unknown")
    row = next(line for line in _status(sqlite_url, env_columns="200").stdout.splitlines()
               if line.startswith("bert-embed "))
    assert [cell.strip() for cell in row.split("│")][-1] == "unknown"
