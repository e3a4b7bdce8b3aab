"""`headroom db downgrade` lists the migrations it reverses and the data their downgrades drop,
and goes ahead only with --yes or a yes at a terminal: without either it refuses (exit 2) and
leaves the store as it was; --dry-run only lists."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env
from typer.testing import CliRunner

import controlplane.cli.downgrade as downgrade_cli
from controlplane.cli import app
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.engine import scripts, store_revision
from controlplane.store.pauses import SqlModelPauses, paused_models

HEAD = scripts().get_current_head()
PAUSE_COLUMNS = ("models.paused_at", "models.paused_by", "models.paused_replicas")


def _paused_store(tmp_path: Path) -> Path:
    """A store at head with the demo models, one of them paused."""
    path = tmp_path / "store.db"
    store = Store.open(f"sqlite:///{path}", migrate=True)
    store.upsert_models(DEMO_MODELS)
    assert SqlModelPauses(store.engine).pause(DEMO_MODELS[0].name, 1,
                                              datetime(2026, 12, 3, 9, tzinfo=UTC), "alice")
    store.engine.dispose()
    return path


def _downgrade(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, "db", "downgrade", *args, "--db", str(path)], env=_env(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)


def _state(path: Path) -> tuple[str | None, int]:
    """The store's revision and how many models it holds paused."""
    store = Store.open(f"sqlite:///{path}")
    try:
        with store.engine.connect() as connection:
            paused = len(paused_models(connection)) if store_revision(store.engine) == HEAD else -1
        return store_revision(store.engine), paused
    finally:
        store.engine.dispose()


def test_a_downgrade_without_yes_and_without_a_terminal_is_refused_and_changes_nothing(
        tmp_path: Path) -> None:
    path = _paused_store(tmp_path)
    run = _downgrade(path, "0020")
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.splitlines()) == 1
    assert run.stderr.startswith(f"error: database sqlite:///{path}: not downgraded to 0020: "
                                 "it reverses 10 migrations and drops data: ")
    assert "models.paused_replicas (1 value)" in run.stderr
    assert "Rerun with --yes to go ahead" in run.stderr
    assert _state(path) == (HEAD, 1)  # at its revision, the pause kept


def test_the_listing_names_each_migration_reversed_and_the_pause_column_with_its_data(
        tmp_path: Path) -> None:
    path = _paused_store(tmp_path)
    run = _downgrade(path, "0020", "--dry-run")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == (f"database sqlite:///{path}: downgrading from {HEAD} to 0020 reverses "
                        "10 migrations:")
    assert [line.split()[0] for line in lines[1:] if not line.startswith("        ")] == [
        "0030", "0029", "0028", "0027", "0026", "0025", "0024", "0023", "0022", "0021"]
    assert "  0022  The models table holds each model's replica bounds" in run.stdout
    assert "        drops column models.paused_replicas: 1 value" in lines
    assert "        drops column models.min_replicas: no data" in lines


def test_a_dry_run_changes_nothing(tmp_path: Path) -> None:
    path = _paused_store(tmp_path)
    run = _downgrade(path, "base", "--dry-run")
    assert run.returncode == 0, run.stderr
    assert f"drops table models: {len(DEMO_MODELS)} rows" in run.stdout
    assert "dry run: nothing changed" in run.stderr
    assert _state(path) == (HEAD, 1)


def test_a_downgrade_with_yes_reverses_the_migrations_listed(tmp_path: Path) -> None:
    path = _paused_store(tmp_path)
    run = _downgrade(path, "0020", "--yes")
    assert run.returncode == 0, run.stderr
    assert "drops column models.paused_replicas: 1 value" in run.stdout
    assert f"database sqlite:///{path} downgraded to 0020\n" in run.stderr
    assert _state(path) == ("0020", -1)


@pytest.mark.parametrize("target", ["head", HEAD])
def test_a_downgrade_to_where_the_store_already_is_says_nothing_changed_not_downgraded(
        tmp_path: Path, target: str) -> None:
    path = _paused_store(tmp_path)
    run = _downgrade(path, target, "--yes")
    assert run.returncode == 0, run.stderr
    assert run.stdout == (f"database sqlite:///{path}: nothing to downgrade to {target} (store "
                          f"at {HEAD})\n")
    assert run.stderr == f"database sqlite:///{path}: nothing changed\n"
    assert _state(path) == (HEAD, 1)


@pytest.mark.parametrize(("answer", "revision"), [("n\n", HEAD), ("y\n", "0021")])
def test_at_a_terminal_the_downgrade_asks_and_a_no_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, revision: str) -> None:
    path = _paused_store(tmp_path)
    monkeypatch.setattr(downgrade_cli, "_interactive", lambda: True)
    result = CliRunner().invoke(app, ["db", "downgrade", "0021", "--db", str(path)],
                                input=answer)
    assert "drops data: models.paused_at (1 value)" in result.output
    assert result.exit_code == (1 if answer == "n\n" else 0), result.output
    assert _state(path)[0] == revision


def test_a_downgrade_listing_follows_a_renamed_column_to_its_name_in_the_store(
        tmp_path: Path) -> None:
    """0006 renamed observations.mean_latency_ms to latency_ms (values kept); 0005's downgrade
    then drops it, named as the store has it."""
    path = _paused_store(tmp_path)
    run = _downgrade(path, "0004", "--dry-run")
    assert run.returncode == 0, run.stderr
    section = run.stdout.split("  0006  ")[1].split("  0005  ")
    assert "drops" not in section[0]  # a rename drops nothing
    assert "drops column observations.latency_ms: no data" in section[1]
    assert "drops column ticks.profiles_json: no data" in section[1]


def test_a_relative_target_of_minus_one_reverses_one_migration_and_names_the_revision_reached(
        tmp_path: Path) -> None:
    path = _paused_store(tmp_path)
    run = _downgrade(path, "-1", "--yes")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"database sqlite:///{path}: downgrading from {HEAD} to 0029 "
                                 "reverses 1 migration:")
    assert f"database sqlite:///{path} downgraded to 0029 (-1)\n" in run.stderr
    assert _state(path) == ("0029", -1)


def test_the_listing_gives_each_migration_its_whole_first_paragraph_not_its_first_line(
        tmp_path: Path) -> None:
    path = _paused_store(tmp_path)
    run = _downgrade(path, "0022", "--dry-run")
    assert run.returncode == 0, run.stderr
    assert ("  0023  Forecasts keep their notes (``notes_json``: a JSON list of lines saying what "
            "was done to the model's history on the way, e.g. negative values clipped to 0). "
            "NULL on forecasts saved before, and on those without notes: nothing noted\n"
            in run.stdout)
