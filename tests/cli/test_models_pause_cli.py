"""`headroom models pause | resume` (SQLite and PostgreSQL): a pause is stored with when and by
whom, `models list` and `status` show it and the models file's replica bounds, resume clears
it; pausing a model the store does not list is a usage error naming it, and writes nothing."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clihelpers import headroom_as_alice, simulated_store

from controlplane.adapters.clock import WallClock
from controlplane.domain.timestamps import utc_text
from controlplane.store import Store
from controlplane.store.pauses import SqlModelPauses

GOOD = (Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml").read_text()
BOUNDED = GOOD.replace("    latency_slo_ms: 100\n",
                       "    latency_slo_ms: 100\n    min_replicas: 2\n    max_replicas: 40\n", 1)


@pytest.fixture(params=["sqlite", "postgresql"])
def imported_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated store with the example models imported, resnet50 bounded to [2, 40]."""
    url = (f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite"
           else str(request.getfixturevalue("postgres_url")))
    Store.open(url, migrate=True).engine.dispose()
    models = tmp_path / "models.yaml"
    models.write_text(BOUNDED)
    assert headroom_as_alice(url, "models", "import", str(models)).returncode == 0
    return url


def test_a_model_is_paused_listed_and_shown_paused_then_resumed(imported_url: str) -> None:
    paused = headroom_as_alice(imported_url, "models", "pause", "resnet50", "--replicas", "3")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith("paused model resnet50 at 3 replica(s)")

    listed = {m["name"]: m for m in json.loads(
        headroom_as_alice(imported_url, "models", "list", "--json").stdout)}
    assert (listed["resnet50"]["min_replicas"], listed["resnet50"]["max_replicas"]) == (2, 40)
    assert listed["resnet50"]["paused"]["replicas"] == 3
    assert listed["resnet50"]["paused"]["paused_by"] == "alice"
    assert listed["llama-3-8b-chat"]["paused"] is None
    assert listed["llama-3-8b-chat"]["min_replicas"] is None
    text = headroom_as_alice(imported_url, "models", "list").stdout
    assert "2/40" in text and "at 3 (paused since" in text and "by alice" in text

    status = headroom_as_alice(imported_url, "status")
    assert "model resnet50 is paused since" in status.stdout, status.stdout + status.stderr
    assert "held at 3 replica(s)" in status.stdout
    doc = json.loads(headroom_as_alice(imported_url, "status", "--json").stdout)
    shown = {m["name"]: m["paused"] for m in doc["models"]}
    assert shown["resnet50"]["replicas"] == 3 and shown["llama-3-8b-chat"] is None

    resumed = headroom_as_alice(imported_url, "models", "resume", "resnet50")
    assert resumed.returncode == 0 and resumed.stdout.startswith("resumed model resnet50 (paused")
    assert SqlModelPauses(Store.open(imported_url).engine).paused_models() == ()
    again = headroom_as_alice(imported_url, "models", "resume", "resnet50")
    assert again.returncode == 0 and again.stdout.startswith("model resnet50 was not paused")


def test_pausing_a_paused_model_again_says_since_when_and_keeps_its_start(
        tmp_path: Path) -> None:
    url, store = _imported(tmp_path)
    at = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    assert SqlModelPauses(store.engine).pause("resnet50", None, at, "bob")
    again = headroom_as_alice(url, "models", "pause", "resnet50")
    assert again.returncode == 0, again.stderr
    assert again.stdout == ("model resnet50 was already paused since 2026-01-05T09:00:00Z by "
                            "bob, at its current replicas: unchanged\n")
    recounted = headroom_as_alice(url, "models", "pause", "resnet50", "--replicas", "3")
    assert recounted.returncode == 0, recounted.stderr
    assert recounted.stdout == ("model resnet50 was already paused since 2026-01-05T09:00:00Z "
                                "by bob: now held at 3 replica(s) instead of its current "
                                "replicas, still paused since then\n")
    shown = {m["name"]: m["paused"] for m in json.loads(
        headroom_as_alice(url, "status", "--json").stdout)["models"]}
    assert shown["resnet50"] == {"replicas": 3, "paused_at": "2026-01-05T09:00:00Z",
                                 "paused_by": "bob"}


@pytest.mark.parametrize("days", [-2, 5], ids=["store-behind-the-wall-clock", "store-ahead-of-it"])
def test_on_a_simulated_store_a_pause_starts_at_its_clock_not_the_wall_clocks(
        tmp_path: Path, days: int) -> None:
    """A demo started days off the wall clock (``--start``): stamped by the wall clock, status,
    the dashboard and headroom_model_paused_since_timestamp_seconds showed a pause days before
    or after the store's last tick. It starts at the store's now, its simulated clock's."""
    db, tick_at = simulated_store(tmp_path, WallClock().now() + timedelta(days=days))
    url = f"sqlite:///{db}"
    paused = headroom_as_alice(url, "models", "pause", "resnet50-vision")
    assert paused.returncode == 0, paused.stderr
    shown = {m["name"]: m["paused"] for m in json.loads(
        headroom_as_alice(url, "status", "--json").stdout)["models"]}
    assert shown["resnet50-vision"]["paused_at"] == utc_text(tick_at)


def test_pausing_or_resuming_a_model_not_listed_is_a_usage_error_naming_it(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    Store.open(url, migrate=True).engine.dispose()
    for command in (["pause", "gpt-5", "--replicas", "1"], ["resume", "gpt-5"]):
        run = headroom_as_alice(url, "models", *command)
        assert run.returncode == 2
        assert run.stderr == ("error: model 'gpt-5' is not listed (see `headroom models "
                              "list`)\n")
    assert SqlModelPauses(Store.open(url).engine).paused_models() == ()
    assert Store.open(url).model_names() == []


def _imported(tmp_path: Path) -> tuple[str, Store]:
    """A new SQLite store in ``tmp_path`` with GOOD's models imported by the CLI: its URL and
    the store."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store.open(url, migrate=True)
    models = tmp_path / "models.yaml"
    models.write_text(GOOD)
    assert headroom_as_alice(url, "models", "import", str(models)).returncode == 0
    return url, store


def test_a_negative_replica_count_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    url, store = _imported(tmp_path)
    run = headroom_as_alice(url, "models", "pause", "resnet50", "--replicas", "-1")
    assert run.returncode == 2 and "--replicas" in run.stderr
    assert SqlModelPauses(store.engine).paused_models() == ()


def test_models_list_and_status_write_a_pause_alike_in_json(tmp_path: Path) -> None:
    url, store = _imported(tmp_path)
    at = datetime(2026, 1, 5, 9, 0, 0, 250_000, tzinfo=UTC)
    assert SqlModelPauses(store.engine).pause("resnet50", 3, at, "")  # no login name known
    listed = {m["name"]: m["paused"] for m in json.loads(
        headroom_as_alice(url, "models", "list", "--json").stdout)}
    shown = {m["name"]: m["paused"] for m in json.loads(
        headroom_as_alice(url, "status", "--json").stdout)["models"]}
    assert listed["resnet50"] == shown["resnet50"] == {
        "replicas": 3, "paused_at": "2026-01-05T09:00:00.250000Z", "paused_by": None}


def test_pausing_on_a_store_a_migration_behind_names_its_revision_and_the_upgrade(
        tmp_path: Path) -> None:
    url, store = _imported(tmp_path)
    store.engine.dispose()
    assert headroom_as_alice(url, "db", "downgrade", "0021", "--yes").returncode == 0
    for command in (["pause", "resnet50"], ["resume", "resnet50"], ["list"]):
        run = headroom_as_alice(url, "models", *command)
        assert run.returncode == 2, run.stderr
        assert len(run.stderr.splitlines()) == 1, run.stderr
        assert re.search(r": the store is at revision 0021, behind by \d+ migrations?; "
                         r"`headroom db upgrade` applies (it|them)\n$", run.stderr), run.stderr


def test_a_replica_count_past_the_stores_integers_is_refused_naming_the_option_or_field(
        imported_url: str, tmp_path: Path) -> None:
    run = headroom_as_alice(imported_url, "models", "pause", "resnet50", "--replicas",
                            "99999999999")
    assert run.returncode == 2 and "--replicas" in run.stderr, run.stderr
    assert "integer out of range" not in run.stderr
    assert SqlModelPauses(Store.open(imported_url).engine).paused_models() == ()
    models = tmp_path / "big.yaml"
    models.write_text(BOUNDED.replace("max_replicas: 40", "max_replicas: 99999999999"))
    imported = headroom_as_alice(imported_url, "models", "import", str(models))
    assert imported.returncode == 2
    assert imported.stderr == (f"error: {models}: models[1] (resnet50): max_replicas: Input "
                               "should be less than or equal to 1000000, got 99999999999\n")
    listed = {m["name"]: m for m in json.loads(
        headroom_as_alice(imported_url, "models", "list", "--json").stdout)}
    assert listed["resnet50"]["max_replicas"] == 40
