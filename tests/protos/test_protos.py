"""The fixed proto contract: stubs are fresh, and the bench judge's contract check passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JUDGE = REPO.parent / "shared" / "bench" / "proto_client.py"


def test_checked_in_stubs_match_a_fresh_generation() -> None:
    done = subprocess.run([sys.executable, "protos/generate.py", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_placement_proto_matches_the_contract_in_design_md() -> None:
    if not JUDGE.exists():
        pytest.fail(f"bench judge missing at {JUDGE}: the shared folder must sit beside the repo")
    done = subprocess.run([sys.executable, str(JUDGE), "--proto-root", str(REPO / "protos")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["contract_mismatches"] == []
