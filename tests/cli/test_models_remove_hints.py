"""`headroom models remove` and the model's demand hints: it names them and withdraws them with the
model in one transaction (unless --keep-hints), so a re-import does not bring a stale hint back
into force; `hint list` and `status` mark a hint whose model the models table does not list."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env, simulated_store
from sqlalchemy import text

from controlplane.adapters.clock import WallClock
from controlplane.domain.hints import DemandHint
from controlplane.domain.timestamps import utc_text
from controlplane.store import Store
from controlplane.store.hints import SqlDemandHints, remove_model_and_hints

MODELS = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml"
CHAT = "llama-3-8b-chat"


def _run(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, *args, "--db", str(db)], env=_env(COLUMNS="250"),
                          capture_output=True, text=True, timeout=120)


def _hints(db: Path) -> list[dict[str, object]]:
    listed: list[dict[str, object]] = json.loads(_run(db, "hint", "list", "--all",
                                                      "--json").stdout)
    return listed


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """`db upgrade`, `models import` of the example (llama-3-8b-chat, resnet50)."""
    path = tmp_path / "store.db"
    Store.open(f"sqlite:///{path}", migrate=True).engine.dispose()
    assert _run(path, "models", "import", str(MODELS)).returncode == 0
    return path


def _add(db: Path, model: str, rate_rps: float, start_at: datetime, end_at: datetime,
         now: datetime) -> DemandHint:
    store = Store.open(f"sqlite:///{db}")
    try:
        return SqlDemandHints(store.engine).add_hint(
            DemandHint(model, rate_rps, start_at, end_at, "launch"), now)
    finally:
        store.engine.dispose()


def test_removing_a_model_names_and_withdraws_its_hints_so_a_re_import_brings_none_back(
        db: Path) -> None:
    now = WallClock().now()
    in_force = _add(db, CHAT, 20000.0, now - timedelta(hours=1), now + timedelta(days=19), now)
    ahead = _add(db, CHAT, 500.0, now + timedelta(hours=1), now + timedelta(hours=2), now)
    ended = _add(db, CHAT, 900.0, now - timedelta(hours=3), now - timedelta(hours=2),
                 now - timedelta(hours=4))
    other = _add(db, "resnet50", 100.0, now, now + timedelta(hours=1), now)
    removed = _run(db, "models", "remove", CHAT)
    assert removed.returncode == 0, removed.stderr
    lines = removed.stdout.splitlines()
    assert lines[0].startswith(f"removed model {CHAT}; ")
    assert lines[1].startswith("withdrew its 2 demand hints in force or ahead at ")
    assert lines[1].endswith(" by the wall clock (--keep-hints keeps them):")
    assert lines[2].startswith(f"  hint {in_force.hint_id}: {CHAT} >= 20000 rps from ")
    assert f"until {in_force.end_at:%Y-%m-%d %H:%M:%S} UTC (launch)" in lines[2]
    assert lines[3].startswith(f"  hint {ahead.hint_id}: {CHAT} >= 500 rps from "
                               f"{ahead.start_at:%Y-%m-%d %H:%M:%S} until ")
    assert len(lines) == 4
    # the ended one stays, as history; the other model's is untouched
    assert [h["id"] for h in _hints(db)] == [ended.hint_id, other.hint_id]
    assert _run(db, "models", "import", str(MODELS)).returncode == 0
    assert [h["id"] for h in json.loads(_run(db, "hint", "list", "--json").stdout)] == [
        other.hint_id]  # nothing of the removed model came back into force


def test_a_model_without_hints_is_removed_saying_it_had_none(db: Path) -> None:
    removed = _run(db, "models", "remove", "resnet50")
    assert removed.returncode == 0, removed.stderr
    [line] = removed.stdout.splitlines()[1:]
    assert re.fullmatch(r"resnet50 had no demand hint in force or ahead at \S+Z by the wall clock",
                        line), line


def test_keep_hints_keeps_them_says_so_and_hint_list_marks_their_model_not_listed(
        db: Path) -> None:
    now = WallClock().now()
    kept = _add(db, CHAT, 20000.0, now, now + timedelta(days=19), now)
    removed = _run(db, "models", "remove", CHAT, "--keep-hints")
    assert removed.returncode == 0, removed.stderr
    lines = removed.stdout.splitlines()
    assert lines[1].startswith("kept its 1 demand hint in force or ahead at ")
    assert lines[1].endswith(f" by the wall clock (--keep-hints): they apply again if {CHAT} is "
                             "imported again; `headroom hint remove ID` withdraws one:")
    assert lines[2].startswith(f"  hint {kept.hint_id}: {CHAT} >= 20000 rps from ")
    assert [(h["id"], h["model_listed"]) for h in _hints(db)] == [(kept.hint_id, False)]
    table = _run(db, "hint", "list").stdout
    assert f"{CHAT} (model not listed)" in table
    assert f"model not listed: {CHAT} (the models table does not list it" in table
    assert _run(db, "models", "import", str(MODELS)).returncode == 0
    assert [(h["id"], h["model_listed"]) for h in _hints(db)] == [(kept.hint_id, True)]
    assert "not listed" not in _run(db, "hint", "list").stdout


def test_status_marks_a_hint_whose_model_is_not_listed_in_its_table_and_json(db: Path) -> None:
    now = WallClock().now()
    kept = _add(db, CHAT, 600.0, now + timedelta(hours=1), now + timedelta(hours=2), now)
    listed = _add(db, "resnet50", 100.0, now + timedelta(hours=1), now + timedelta(hours=2), now)
    assert _run(db, "models", "remove", CHAT, "--keep-hints").returncode == 0
    doc = json.loads(_run(db, "status", "--json").stdout)
    assert [(h["id"], h["model_listed"]) for h in doc["hints"]] == [
        (kept.hint_id, False), (listed.hint_id, True)]
    table = _run(db, "status").stdout
    assert f"{CHAT} (model not listed)" in table and "resnet50 (model not listed)" not in table


def test_a_model_whose_hints_cannot_be_withdrawn_is_not_removed_either(db: Path) -> None:
    now = WallClock().now()
    hint = _add(db, CHAT, 600.0, now, now + timedelta(hours=1), now)
    store = Store.open(f"sqlite:///{db}")
    try:
        with store.engine.begin() as connection:  # a hint delete that fails: after the model's
            connection.execute(text(
                "CREATE TRIGGER no_withdraw BEFORE DELETE ON demand_hints "
                "BEGIN SELECT RAISE(ABORT, 'hints are read-only'); END"))
        with pytest.raises(Exception, match="hints are read-only"):
            remove_model_and_hints(store.engine, CHAT, now)
        assert CHAT in store.model_names()  # nothing half-applied
        assert [h.hint_id for h in SqlDemandHints(store.engine).hints()] == [hint.hint_id]
    finally:
        store.engine.dispose()


def test_removing_a_model_that_is_not_listed_touches_no_hint(db: Path) -> None:
    now = WallClock().now()
    hint = _add(db, CHAT, 600.0, now, now + timedelta(hours=1), now)
    gone = _run(db, "models", "remove", "nope")
    assert gone.returncode == 2
    assert gone.stderr == "error: model 'nope' is not listed (see `headroom models list`)\n"
    assert [h["id"] for h in _hints(db)] == [hint.hint_id]


def test_on_a_simulated_store_behind_the_wall_clock_its_clock_judges_the_hints_withdrawn(
        tmp_path: Path) -> None:
    """A demo started days back (``--start``): a hint in force by its simulated clock had ended
    by the wall clock's, so remove left it behind ("had no demand hint in force or ahead") and
    a demo that listed the model again sized it from the stale hint. The loop's clock judges."""
    db, tick_at = simulated_store(tmp_path, WallClock().now() - timedelta(days=2))
    in_force = _add(db, CHAT, 600.0, tick_at, tick_at + timedelta(hours=2), tick_at)
    ended = _add(db, CHAT, 900.0, tick_at - timedelta(hours=2), tick_at - timedelta(hours=1),
                 tick_at - timedelta(hours=3))
    removed = _run(db, "models", "remove", CHAT)
    assert removed.returncode == 0, removed.stderr
    lines = removed.stdout.splitlines()
    assert lines[1] == (f"withdrew its 1 demand hint in force or ahead at {utc_text(tick_at)} "
                        "by the store's simulated clock (--keep-hints keeps them):")
    assert lines[2].startswith(f"  hint {in_force.hint_id}: {CHAT} >= 600 rps from ")
    assert [h["id"] for h in _hints(db)] == [ended.hint_id]  # the ended one stays, as history


def test_on_a_simulated_store_ahead_of_the_wall_clock_a_hint_ended_by_its_clock_is_history(
        tmp_path: Path) -> None:
    """``demo --start`` days ahead: a hint that ended an hour before the store's last tick is
    history there (not withdrawn, not listed as in force), though the wall clock has not
    reached its end."""
    db, tick_at = simulated_store(tmp_path, WallClock().now() + timedelta(days=5))
    ended = _add(db, CHAT, 900.0, tick_at - timedelta(hours=2), tick_at - timedelta(hours=1),
                 tick_at - timedelta(hours=3))
    removed = _run(db, "models", "remove", CHAT)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines()[1:] == [
        f"{CHAT} had no demand hint in force or ahead at {utc_text(tick_at)} by the store's "
        "simulated clock"]
    assert [h["id"] for h in _hints(db)] == [ended.hint_id]
