"""The reconcile tick's store reads on a store as full as a long run leaves it.

Fills a fresh SQLite store as ``--models`` models over ``--days`` days of a 30 s loop leave it
(an observation per model and tick, a forecast and an issued-forecast record per model and
5-minute refresh; all inside the default 30-day retention and 14-day calibration window), then
times what every tick reads from it:

- ``profile_samples``: every model's observations of the last hour (the profile correction);
  its query plan says whether it reads the window through an index or scans the table;
- ``issued_since`` after a tick's writes (200 new first steps, the previous ones scored): the
  calibration records of the window, as the loop's ledger brings its copy up to date;
- ``latest_forecasts``: each model's newest forecast.

Prints a table and writes ``benchmarks/results/longrun_store_reads.json``.

    python benchmarks/longrun/store_reads.py [--models 200] [--days 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event, insert
from sqlmodel import SQLModel

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # for benchmarks.provenance

from benchmarks.provenance import provenance, start
from controlplane.autoscaling.issued import IssuedForecast
from controlplane.store import Store
from controlplane.store.ledger import SqlForecastLedger

START_AT = datetime(2026, 11, 2, tzinfo=UTC)
TICK_S, REFRESH_S = 30, 300
RESULTS = Path(__file__).resolve().parent.parent / "results" / "longrun_store_reads.json"


def fill(store: Store, models: list[str], days: float) -> None:
    tables = SQLModel.metadata.tables
    end_at = START_AT + timedelta(days=days)
    steps = json.dumps([10.0] * 20)
    with store.engine.begin() as connection:
        batch: list[dict[str, Any]] = []
        at = START_AT
        while at < end_at:
            batch += [dict(model=m, at=at, demand_rps=10.0, capacity_rps=12.0, replicas_ready=2,
                           latency_ms=100.0) for m in models]
            if len(batch) >= 50_000:
                connection.execute(insert(tables["observations"]), batch)
                batch = []
            at += timedelta(seconds=TICK_S)
        if batch:
            connection.execute(insert(tables["observations"]), batch)
        at = START_AT
        while at < end_at:
            connection.execute(insert(tables["forecasts"]), [dict(
                model=m, computed_at=at, origin_at=at, step_s=60, p50_json=steps,
                p90_json=steps, method="level", fallback_reason="") for m in models])
            connection.execute(insert(tables["issued_forecasts"]), [dict(
                model=m, target_at=at, step_s=60, p50_rps=10.0, p90_rps=12.0, sigma=0.1,
                observed_rps=10.0, scored_at=at) for m in models])
            at += timedelta(seconds=REFRESH_S)


def best_s(call: Callable[[], object], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def profile_samples_plan(store: Store, now: datetime) -> str:
    seen: list[tuple[str, Any]] = []

    def capture(conn: object, cursor: object, statement: str, parameters: Any,
                context: object, executemany: bool) -> None:
        seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", capture)
    store.profile_samples(now - timedelta(hours=1), now)
    event.remove(store.engine, "before_cursor_execute", capture)
    statement, parameters = seen[-1]
    with store.engine.connect() as connection:
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
    return "; ".join(str(row[-1]) for row in rows)


def ledger_tick_s(store: Store, models: list[str], now: datetime, ticks: int) -> list[float]:
    reader, writer = SqlForecastLedger(store.engine), SqlForecastLedger(store.engine)
    since_at = now - timedelta(days=14)
    reader.issued_since(since_at)
    out = []
    for k in range(ticks):
        at = now + timedelta(seconds=REFRESH_S * k)
        writer.record_issued([IssuedForecast(m, at, 60, 10.0, 12.0, 0.1) for m in models])
        if k:
            before = at - timedelta(seconds=REFRESH_S)
            writer.record_scored([IssuedForecast(m, before, 60, 10.0, 12.0, 0.1).scored(9.0, at)
                                  for m in models])
        out.append(best_s(lambda: reader.issued_since(since_at), runs=1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--days", type=float, default=3.0)
    args = parser.parse_args()
    started_run = start()
    models = [f"model-{i:03d}" for i in range(args.models)]
    now = START_AT + timedelta(days=args.days)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "longrun.db"
        store = Store.open(f"sqlite:///{db}", migrate=True)
        started = time.perf_counter()
        fill(store, models, args.days)
        filled_s = time.perf_counter() - started
        counts = store.counts()
        ledger_s = ledger_tick_s(store, models, now, ticks=5)
        result = {
            "models": args.models, "days": args.days, "fill_s": round(filled_s, 1),
            "db_mib": round(db.stat().st_size / 2**20, 1), "forecasts": counts["forecasts"],
            "profile_samples_s": round(best_s(
                lambda: store.profile_samples(now - timedelta(hours=1), now)), 3),
            "profile_samples_plan": profile_samples_plan(store, now),
            "latest_forecasts_s": round(best_s(store.latest_forecasts), 3),
            "issued_since_per_tick_s": [round(s, 3) for s in ledger_s],
        }
    width = max(map(len, result))
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    RESULTS.write_text(json.dumps({**result, "provenance": provenance(started_run)}, indent=2)
                       + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
