"""`headroom fleet pause | resume` (SQLite and PostgreSQL): the pause is stored with when, by
whom and why, `headroom status` shows it (text and JSON), a second pause says the fleet was
already paused and keeps its start, resume clears it; a reason over its column's length is a
usage error naming the option, and writes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clihelpers import headroom_as_alice

from controlplane.store import Store
from controlplane.store.fleet_pause import SqlFleetPause

EFFECT = ("each tick plans and records a dry run and changes nothing until `headroom fleet "
          "resume`")


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url = (f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite"
           else str(request.getfixturevalue("postgres_url")))
    Store.open(url, migrate=True).engine.dispose()
    return url


def test_the_fleet_is_paused_shown_by_status_and_resumed(url: str) -> None:
    paused = headroom_as_alice(url, "fleet", "pause", "--reason", "incident 4711")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout == f"paused the fleet (incident 4711): {EFFECT}\n"

    again = headroom_as_alice(url, "fleet", "pause")
    assert again.returncode == 0, again.stderr
    assert re.fullmatch(r"the fleet was already paused since \S+Z by alice \(incident 4711\): "
                        + re.escape(EFFECT) + "\n", again.stdout), again.stdout

    text = headroom_as_alice(url, "status").stdout
    assert "fleet paused" in text and "(incident 4711)" in text
    document = json.loads(headroom_as_alice(url, "status", "--json").stdout)
    assert document["fleet_pause"]["paused_by"] == "alice"
    assert document["fleet_pause"]["reason"] == "incident 4711"
    assert document["fleet_pause"]["paused_at"].endswith("Z")

    resumed = headroom_as_alice(url, "fleet", "resume")
    assert resumed.returncode == 0, resumed.stderr
    assert re.fullmatch(r"resumed the fleet \(paused since \S+Z by alice\): the next tick "
                        r"changes it again\n", resumed.stdout), resumed.stdout
    assert json.loads(headroom_as_alice(url, "status", "--json").stdout)["fleet_pause"] is None
    assert headroom_as_alice(url, "fleet", "resume").stdout == "the fleet was not paused\n"


def test_a_reason_too_long_is_a_usage_error_and_pauses_nothing(url: str) -> None:
    run = headroom_as_alice(url, "fleet", "pause", "--reason", "x" * 501)
    assert run.returncode == 2
    assert "--reason" in run.stderr and "at most 500 characters, got 501" in run.stderr
    assert SqlFleetPause(Store.open(url).engine).fleet_pause() is None
