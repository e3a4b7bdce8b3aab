"""`headroom demo` keeps its placement state in its store's placement journal, as `serve` does:
a workload a serving layer bound through the demo's placement API is listed by `headroom
placement bindings` on the demo's store, and a resumed demo still holds it where it was."""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env

from controlplane.demo import Demo
from controlplane.settings import load_settings
from protos.headroom.v1 import placement_pb2 as pb

START_AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _demo(db: Path) -> Demo:
    return Demo(load_settings(db={"url": f"sqlite:///{db}"},
                              forecast={"state_dir": str(db.parent / "forecaster-state")}),
                START_AT)


def test_a_binding_made_through_the_demo_is_listed_on_its_store_and_kept_on_resume(
        tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    demo = _demo(db)
    try:
        demo.run_fast(1)  # one reconcile tick: the simulated fleet's inventory is synced
        bound = demo.engine.place(pb.PlaceRequest(
            workload_id="edge/whisper-0", model="whisper", tenant="t", num_gpu=1,
            gpu_milli=100, cpu_milli=100, memory_mib=128)).binding
    finally:
        demo.shutdown()
    listed = subprocess.run([*WARM_HEADROOM, "placement", "bindings", "--db", str(db), "--json"],
                            env=_env(), capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [(d["workload_id"], d["node"], d["gpu_indices"]) for d in json.loads(listed.stdout)
            ] == [("edge/whisper-0", bound.node, list(bound.gpu_indices))]
    resumed = _demo(db)
    try:
        resumed.run_fast(1)
        kept = resumed.engine.binding("edge/whisper-0")
    finally:
        resumed.shutdown()
    assert kept is not None
    assert (kept.node, list(kept.gpu_indices)) == (bound.node, list(bound.gpu_indices))



@pytest.mark.parametrize("speed", [600, 6000])
def test_a_live_demo_faster_than_its_jobs_records_them_no_closer_than_half_their_interval(
        tmp_path: Path, speed: int) -> None:
    db = tmp_path / "demo.db"
    demo = _demo(db)
    try:  # a 0.5 s sim step at 600 x would be 300 simulated s, ten reconcile intervals
        demo.run_live(speed=speed, minutes=30)
    finally:
        demo.shutdown()
    with contextlib.closing(sqlite3.connect(db)) as store:
        ticks = [_at(r[0]) for r in store.execute("SELECT started_at FROM ticks ORDER BY id")]
        refreshes = [_at(r[0]) for r in store.execute(
            "SELECT DISTINCT computed_at FROM forecasts ORDER BY computed_at")]
    assert len(ticks) >= 3 and len(refreshes) >= 2
    assert min(_gaps_s(ticks)) >= 15, ticks  # reconcile.interval_s 30
    assert min(_gaps_s(refreshes)) >= 150, refreshes  # forecast.interval_s 300


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _gaps_s(times: list[datetime]) -> list[float]:
    return [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
