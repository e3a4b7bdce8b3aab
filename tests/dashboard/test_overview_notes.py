"""The Overview's warning with the last tick's notes (what it could not read or do, and what it
found wrong), rendered by Streamlit's AppTest over copies of a store the real core filled."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from dashboard_support import Seeded
from streamlit.testing.v1 import AppTest

from controlplane.autoscaling.hint_capacity import CappedHint

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def _with_last_tick_notes(seeded: Seeded, tmp_path: Path, notes: list[str]) -> str:
    """A copy of the seeded store whose newest tick noted ``notes``."""
    copy = tmp_path / "noted.db"
    with closing(sqlite3.connect(seeded.url.removeprefix("sqlite:///"))) as source, \
            closing(sqlite3.connect(copy)) as target:
        source.backup(target)
        (observed,) = target.execute(
            "SELECT observed_json FROM ticks ORDER BY id DESC LIMIT 1").fetchone()
        target.execute("UPDATE ticks SET observed_json = ? WHERE id = (SELECT max(id) FROM ticks)",
                       (json.dumps({**json.loads(observed), "notes": notes}),))
        target.commit()
    return f"sqlite:///{copy}"


MISMATCH = ("model llama-3-8b-chat: Deployment models/llama-3-8b-chat asks for nvidia.com/gpu: 1 "
            "per pod, but the plan places its 4 replicas on MIG 3g.40gb instances of A100-80GB "
            "(nvidia.com/mig-3g.40gb: 1 each): they stay Pending or run on other GPUs than the "
            "plan counts. Headroom does not change the workload: give its pods the planned "
            "slice's GPU resource; reason workload_slice_mismatch")


def test_overview_warns_with_the_last_ticks_notes_written_as_they_are(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", _with_last_tick_notes(seeded, tmp_path, [MISMATCH]))
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    (warning,) = [w.value for w in at.warning if "last tick noted" in w.value]
    assert warning.startswith("The last tick noted 1 thing(s) to look at")
    assert MISMATCH.replace("_", "\\_") in warning  # snake_case reasons are not italics
    assert not [e for e in at.expander if "notes of the last tick" in e.label]


def test_overview_lists_every_note_in_an_expander_when_there_are_many(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = [f"node gpu-{i}: mig.config=all-1g.10gb state=pending" for i in range(5)]
    monkeypatch.setenv("HEADROOM_DB__URL", _with_last_tick_notes(seeded, tmp_path, notes))
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    (warning,) = [w.value for w in at.warning if "last tick noted" in w.value]
    assert "node gpu-2:" in warning and "node gpu-3:" not in warning
    assert warning.endswith("…and 2 more below.")
    (listed,) = [e for e in at.expander if e.label == "All 5 notes of the last tick"]
    assert all(f"node gpu-{i}:" in listed.markdown[0].value for i in range(5))


def test_overview_shows_no_notes_warning_for_a_tick_without_notes(
        seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not [w for w in at.warning if "last tick noted" in w.value]


def test_overview_warns_when_a_pool_capped_a_demand_hint_as_the_tick_noted_it(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capped = CappedHint("llama-3-70b", 120.0, 60.0, 4, "pool_max_nodes:h100").note()
    monkeypatch.setenv("HEADROOM_DB__URL", _with_last_tick_notes(seeded, tmp_path, [capped]))
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    (warning,) = [w.value for w in at.warning if "last tick noted" in w.value]
    assert ("demand hint on llama-3-70b: 120 rps announced, 4 replicas sized for 60 rps: "
            "capped by pool\\_max\\_nodes:h100") in warning
