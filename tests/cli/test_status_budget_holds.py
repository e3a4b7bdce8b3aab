"""A tenant's GPU budget that holds its models below what their demand sized says so at every
tick it binds, not only at a tick that changed their replicas: a demo-like fleet that starts
warm, already at the budget, never changes them, yet `headroom status` must say what holds
them back and why. A budget is the operator's deliberate cap, so the fleet stays healthy."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from datetime import UTC, datetime

from clihelpers import headroom_status

from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
#: the demo's models of tenant acme: its budget of 1 GPU holds both below their demand
ACME = ("llama-3-8b-chat", "mistral-7b-support")
HOLD = re.compile(r"model (?P<model>\S+): (?P<sized>\d+) replicas sized for its demand, "
                  r"(?P<held>\d+) held: capped by tenant_gpu_budget:acme \(1 GPU\)")


def _budgeted_run(url: str) -> None:
    """Six simulated minutes of the demo's fleet, started warm, with acme's budget at 1 GPU."""
    settings = load_settings(db={"url": url}, sim={"history_s": 3600},
                             autoscaling={"tenant_gpu_budgets": {"acme": 1}})
    SimRuntime.open(settings, Store.open(url, migrate=True), AT).advance(6 * 60)


def _tick_notes(url: str) -> list[list[str]]:
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
        rows = db.execute("SELECT observed_json FROM ticks ORDER BY id").fetchall()
    return [list(json.loads(text).get("notes", [])) for (text,) in rows]


def test_every_tick_a_tenant_budget_holds_a_warm_fleet_short_notes_sized_and_held_replicas(
        sqlite_url: str) -> None:
    _budgeted_run(sqlite_url)
    ticks = _tick_notes(sqlite_url)
    assert len(ticks) >= 6
    for notes in ticks:  # before: no tick said it, the fleet never changing its replicas
        holds = {m["model"]: (int(m["sized"]), int(m["held"]))
                 for n in notes if (m := HOLD.fullmatch(n))}
        assert set(holds) == set(ACME), notes
        assert all(held < sized for sized, held in holds.values()), holds


def test_status_shows_the_budget_hold_under_the_last_tick_and_stays_healthy(
        sqlite_url: str) -> None:
    _budgeted_run(sqlite_url)
    run = headroom_status(sqlite_url, "--max-tick-age-s", "1e9")
    assert run.returncode == 0, run.stdout + run.stderr  # a deliberate cap, not a fault
    assert run.stdout.rstrip().endswith("healthy")
    notes = [line.split("│", 1)[1].strip() for line in run.stdout.splitlines()
             if line.startswith("note ")]  # 200 columns wide: one line each
    assert {m["model"] for n in notes if (m := HOLD.fullmatch(n))} == set(ACME), run.stdout
