"""Every time the CLI prints, in ``--json`` documents and in the words of its tables and lines,
is UTC spelled one way: RFC 3339 with a ``Z`` (``2026-12-03T08:00:00Z``), never ``+00:00``."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from clihelpers import WARM_HEADROOM, _env

from controlplane.domain.hints import DemandHint
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.hints import SqlDemandHints

START_AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
#: an ISO-8601 time of day with whatever zone follows it (none, Z or an offset)
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?")


def _headroom(db: Path, *args: str) -> str:
    run = subprocess.run([*WARM_HEADROOM, *args, "--db", str(db)], env=_env(COLUMNS="200"),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode in (0, 1), run.stderr  # status: 1 = the simulated tick is stale
    return run.stdout


def _times(text: str) -> list[str]:
    return ISO_TIME.findall(text)


def test_the_cli_prints_every_utc_time_in_json_and_in_words_as_rfc_3339_with_a_z(
        tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    url = f"sqlite:///{db}"
    runtime = SimRuntime.open(load_settings(db={"url": url}, sim={"history_s": 3600}),
                              Store.open(url, migrate=True), START_AT)
    runtime.advance(120)
    SqlDemandHints(runtime.store.engine).add_hint(DemandHint(
        "llama-3-8b-chat", 600.0, START_AT + timedelta(days=1000),
        START_AT + timedelta(days=1000, hours=2), "launch"), START_AT)
    status_json = _headroom(db, "status", "--json")
    hints_json = _headroom(db, "hint", "list", "--json")
    status_words = _headroom(db, "status")
    doc = json.loads(status_json)
    assert doc["last_tick"]["started_at"] == "2026-12-03T08:02:00Z"
    assert json.loads(hints_json)[0]["start_at"] == "2029-08-29T08:00:00Z"
    assert "#5 at 2026-12-03T08:02:00Z (" in status_words  # the last tick
    for printed in (status_json, hints_json, status_words):
        assert _times(printed), printed  # each output does print times
        assert [t for t in _times(printed) if not t.endswith("Z")] == []
        assert "+00:00" not in printed
