"""``headroom demo`` keeps ``db.retention_s`` by its simulated clock, live as well as in the fast
``--minutes N --no-dashboard`` run, and its summary counts the ticks, placements and forecasts
the run made, not the rows pruning left in the store."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from controlplane.demo import Demo
from controlplane.domain.tick import TickReport
from controlplane.settings import Settings, load_settings

START_AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
RETENTION_S = 3600.0
PRUNE_INTERVAL_S = 600.0


def _settings(tmp_path: Path) -> Settings:
    return load_settings(db={"url": f"sqlite:///{tmp_path / 'demo.db'}",
                             "retention_s": RETENTION_S, "prune_interval_s": PRUNE_INTERVAL_S},
                         forecast={"history_s": 3600, "state_dir": str(tmp_path / "state")},
                         sim={"history_s": 4 * 3600})


def _oldest(db: Path) -> tuple[datetime, datetime]:
    """The oldest tick's start and the oldest observation, as stored."""
    with closing(sqlite3.connect(db)) as connection:
        tick, = connection.execute("SELECT min(started_at) FROM ticks").fetchone()
        seen, = connection.execute("SELECT min(at) FROM observations").fetchone()
    return (datetime.fromisoformat(tick).replace(tzinfo=UTC),
            datetime.fromisoformat(seen).replace(tzinfo=UTC))


def test_the_live_demo_prunes_what_is_older_than_the_retention_by_its_simulated_clock(
        tmp_path: Path) -> None:
    demo = Demo(_settings(tmp_path), START_AT)
    try:
        demo.run_live(600.0, minutes=80)  # 80 simulated minutes: 8 wall seconds
    finally:
        demo.shutdown()
    now = demo.runtime.clock.now()
    # a prune every PRUNE_INTERVAL_S of simulated time, the last one at most that long ago
    kept_from = now - timedelta(seconds=RETENTION_S + PRUNE_INTERVAL_S)
    oldest_tick, oldest_seen = _oldest(tmp_path / "demo.db")
    assert oldest_tick >= kept_from, (oldest_tick, now)
    assert oldest_seen >= kept_from, (oldest_seen, now)
    assert now - START_AT >= timedelta(minutes=80)  # the first tick's record went


def test_the_fast_demos_summary_counts_every_tick_it_ran_though_pruning_deleted_most(
        tmp_path: Path) -> None:
    demo = Demo(_settings(tmp_path), START_AT)
    ran: list[TickReport] = []
    demo.runtime.on_tick = lambda report, _saved: ran.append(report)
    try:
        demo.run_fast(90)
        summary = demo.summary()
    finally:
        demo.shutdown()
    stored = demo.store.counts()
    assert summary.ticks == len(ran) == 181  # one at the start, then one per 30 s
    assert stored["ticks"] < len(ran)  # pruned: the store's count undercounts the run
    assert summary.placements == sum(len(r.placement.segments) for r in ran
                                     if r.placement is not None and r.plan is not None)
    assert summary.placements > stored["placements"]
    assert summary.forecasts > 0
