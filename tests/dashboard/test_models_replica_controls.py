"""The Models page shows what bounds or holds each model's replicas: its replica bounds (the
models file's min_replicas / max_replicas), its pause (`headroom models pause`: the replicas
held, since when, by whom) and the reason of its newest replica change (a bound, a pause or a
capped demand hint name themselves there), rendered by Streamlit's AppTest over copies of a
store the real core filled."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dashboard_support import (
    Seeded,
    all_models_table,
    as_shown,
    copy_store,
    copy_store_at,
    open_page,
)

from controlplane.domain.hints import DemandHint
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.engine import make_engine
from controlplane.store.hints import SqlDemandHints
from controlplane.store.pauses import SqlModelPauses

BOUNDED = "llama-3-70b"
PAUSED = "whisper-asr"
PAUSED_AT = datetime(2026, 3, 3, 0, 10, tzinfo=UTC)
#: the reason the sizing core gives a replica target a max_replicas bound lowered
BOUND_REASON = "forecast_p90+max_replicas:4"
#: and one a node pool's max_nodes gave when it capped a demand hint
CAPPED_REASON = "pool_max_nodes:t4+demand_hint_capped:60/120rps"


def _copy(seeded: Seeded, tmp_path: Path) -> str:
    return copy_store(seeded.url, tmp_path / "controls.db")


def _newest_replica_change_says(url: str, model: str, reason: str) -> None:
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
        db.execute("UPDATE actions SET reason = ? WHERE id = (SELECT max(id) FROM actions "
                   "WHERE kind = 'set_replicas' AND NOT skipped AND target = ?)", (reason, model))
        assert db.total_changes == 1
        db.commit()


def _with_bounds_and_a_pause(seeded: Seeded, tmp_path: Path) -> str:
    """A copy of the seeded store where BOUNDED has min 2 / max 4 replicas and its newest
    replica change was set by the max, and PAUSED is paused at 3 replicas by alice."""
    url = _copy(seeded, tmp_path)
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
        db.execute("UPDATE models SET min_replicas = 2, max_replicas = 4 WHERE name = ?",
                   (BOUNDED,))
        db.commit()
    _newest_replica_change_says(url, BOUNDED, BOUND_REASON)
    engine = make_engine(url)
    assert SqlModelPauses(engine).pause(PAUSED, 3, PAUSED_AT, "alice")
    engine.dispose()
    return url


def test_the_all_models_table_shows_each_models_replica_bounds_blank_when_unset(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = all_models_table(_with_bounds_and_a_pause(seeded, tmp_path), monkeypatch)
    assert (table.loc[BOUNDED, "min_replicas"], table.loc[BOUNDED, "max_replicas"]) == ("2", "4")
    others = table.drop(index=BOUNDED)
    assert set(others["min_replicas"]) == {""} and set(others["max_replicas"]) == {""}


def test_the_all_models_table_says_which_model_is_paused_at_how_many_since_when_by_whom(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = all_models_table(_with_bounds_and_a_pause(seeded, tmp_path), monkeypatch)
    assert table.loc[PAUSED, "paused"] == (
        "held at 3 replica(s) since 2026-03-03 00:10:00 UTC by alice")
    assert set(table.drop(index=PAUSED)["paused"]) == {""}


def test_the_all_models_table_shows_the_reason_of_each_models_newest_replica_change(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _with_bounds_and_a_pause(seeded, tmp_path)
    _newest_replica_change_says(url, PAUSED, CAPPED_REASON)
    table = all_models_table(url, monkeypatch)
    assert table.loc[BOUNDED, "replica_reason"] == BOUND_REASON
    assert table.loc[PAUSED, "replica_reason"] == CAPPED_REASON


def test_a_paused_model_chosen_is_a_warning_naming_its_held_replicas_and_how_to_resume(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(_with_bounds_and_a_pause(seeded, tmp_path), "views/models.py", monkeypatch)
    at.selectbox[0].set_value(PAUSED).run()
    assert not at.exception, [e.value for e in at.exception]
    (warning,) = [as_shown(w.value) for w in at.warning]
    assert warning == (f"{PAUSED} is paused (headroom models pause): held at 3 replica(s) since "
                       "2026-03-03 00:10:00 UTC by alice; the loop plans no change for it "
                       f"until headroom models resume {PAUSED}")


def test_a_bounded_model_chosen_shows_its_bounds_and_its_newest_replica_change_with_the_reason(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(_with_bounds_and_a_pause(seeded, tmp_path), "views/models.py", monkeypatch)
    at.selectbox[0].set_value(BOUNDED).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.warning
    captions = [as_shown(c.value) for c in at.caption]
    assert ("Replica bounds (models file): min 2, max 4; a GPU budget or pool max_nodes still "
            "wins over the min") in captions
    (change,) = [c for c in captions if c.startswith("Newest replica change: ")]
    assert change.endswith(f"UTC (applied), reason {BOUND_REASON}")


def test_a_store_older_than_the_bounds_and_pauses_shows_the_models_page_with_none_of_either(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = all_models_table(copy_store_at(seeded.url, tmp_path / "controls.db", "0021"),
                             monkeypatch)
    assert len(table) == 6
    assert set(table["min_replicas"]) == set(table["max_replicas"]) == set(table["paused"]) == {""}


def test_the_overview_names_each_paused_model_with_its_held_replicas_since_when_and_by_whom(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(_with_bounds_and_a_pause(seeded, tmp_path), "views/overview.py", monkeypatch)
    (paused,) = [as_shown(c.value) for c in at.caption if c.value.startswith("Paused models")]
    assert paused == ("Paused models (headroom models pause, until headroom models resume "
                      f"NAME): {PAUSED} held at 3 replica(s) since 2026-03-03 00:10:00 UTC by "
                      "alice")


def test_the_overview_names_no_paused_model_when_none_is(
        seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(seeded.url, "views/overview.py", monkeypatch)
    assert not [c for c in at.caption if c.value.startswith("Paused models")]


def _budgeted_store(tmp_path: Path) -> str:
    """A store the real core filled over six simulated minutes of the demo's fleet, started
    warm, with tenant acme's GPU budget at 1: both its models held short every tick, their
    replicas never changed."""
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    settings = load_settings(db={"url": url}, sim={"history_s": 3600},
                             autoscaling={"tenant_gpu_budgets": {"acme": 1}})
    SimRuntime.open(settings, Store.open(url, migrate=True),
                    datetime(2026, 12, 3, 8, 0, tzinfo=UTC)).advance(6 * 60)
    return url


def test_a_model_a_tenant_budget_holds_short_shows_it_as_its_replica_reason_and_caption(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _budgeted_store(tmp_path)
    table = all_models_table(url, monkeypatch)
    held = r"tenant_gpu_budget:acme: \d+ of \d+ replicas held"
    for model in ("llama-3-8b-chat", "mistral-7b-support"):  # before: blank, no change made
        assert re.fullmatch(held, table.loc[model, "replica_reason"]), table.loc[model]
    assert not table.drop(index=["llama-3-8b-chat", "mistral-7b-support"])[
        "replica_reason"].str.startswith("tenant_gpu_budget").any()
    at = open_page(url, "views/models.py", monkeypatch)
    at.selectbox[0].set_value("mistral-7b-support").run()
    assert not at.exception, [e.value for e in at.exception]
    (caption,) = [as_shown(c.value) for c in at.caption
                  if c.value.startswith("Held short at the newest tick: ")]
    assert re.fullmatch(r"Held short at the newest tick: model mistral-7b-support: \d+ replicas "
                        r"sized for its demand, \d+ held: capped by tenant_gpu_budget:acme "
                        r"\(1 GPU\)", caption)


def test_a_paused_models_demand_hint_says_the_pause_overrides_it_as_headroom_status_does(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _with_bounds_and_a_pause(seeded, tmp_path)
    hints = SqlDemandHints(make_engine(url))
    window = (seeded.end_at - timedelta(hours=1), seeded.end_at + timedelta(hours=1))
    for model in (PAUSED, BOUNDED):
        hints.add_hint(DemandHint(model, 90.0, *window), seeded.end_at)
    at = open_page(url, "views/models.py", monkeypatch)
    shown = {}
    for model in (PAUSED, BOUNDED):
        at.selectbox[0].set_value(model).run()
        assert not at.exception, [e.value for e in at.exception]
        (shown[model],) = [as_shown(c.value) for c in at.caption
                           if c.value.startswith("Demand hint")]
    assert shown[PAUSED].endswith(  # before: "the loop sizes from the forecast floored by it"
        f"; the pause overrides it until headroom models resume {PAUSED}")
    assert shown[BOUNDED].endswith("; the loop sizes from the forecast floored by it")
