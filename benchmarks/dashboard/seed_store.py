"""Seed a large Headroom store for the dashboard benchmark: 200 models (12 tenants) on pools of
1,000 GPUs (A100-80GB and H100-80GB with MIG/MPS, L4 whole or time-sliced), 7 days of minute
data. The plan fills at most TARGET_FILL (82 %) of each pool at its peak and each tick's
snapshot holds only the nodes it bills: 340-812 GPUs per tick (327-782 with replicas on them),
388 in the store's inventory (the last tick's); 1,000 is the pools' capacity, not a fleet the
store holds (default --models 200 --days 7 --seed 11).

Every table gets the rows the real reconcile loop would write at one tick a minute: per-model
observations (with the latency, queue and KV cache a vLLM model's engine reports: ``signals``),
a tick with its observed snapshot (pools, nodes with their GPUs, models), a plan with one
placement row per replica slice, set_replicas actions with outcomes when replica targets
change, and a forecast per model every 5 minutes. Rows go in with SQLAlchemy core bulk inserts
(executemany), one transaction per simulated day.

    python benchmarks/dashboard/seed_store.py --db /tmp/headroom-bench/dashboard.db
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import Connection, insert

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from controlplane.cost_reader import table  # noqa: E402
from controlplane.store import Store  # noqa: E402

END_AT = datetime(2026, 3, 9, 0, 0, tzinfo=UTC)
POOLS = (  # name, product, GPUs per node, nodes, price, MIG-capable, memory MiB
    ("a100-80gb", "A100-80GB", 8, 60, 5.12, True, 81920),
    ("h100-80gb", "H100-80GB", 8, 40, 6.88, True, 81559),
    ("l4", "L4", 4, 50, 0.80, False, 23034),
)
# kind: product, compute slices (0 = whole GPU), replicas per GPU, mode, profile, rps/replica
KINDS = {
    "resnet50": ("A100-80GB", 1, 7, "mps", "1g.10gb", 220.0),
    "mistral-7b": ("A100-80GB", 2, 3, "mig", "2g.20gb", 18.0),
    "llama-8b": ("A100-80GB", 3, 2, "mps", "3g.40gb", 40.0),
    "qwen-14b": ("A100-80GB", 4, 1, "mig", "4g.40gb", 30.0),
    "sdxl": ("H100-80GB", 3, 2, "mig", "3g.40gb", 4.0),
    "llama-70b": ("H100-80GB", 0, 1, "exclusive", "7g.80gb", 12.0),
    "bert-embed": ("L4", 0, 2, "time_sliced", "", 300.0),
    "whisper": ("L4", 0, 1, "exclusive", "", 20.0),
}
MIG_STARTS = {1: (0, 1, 2, 3, 4, 5, 6), 2: (0, 2, 4), 3: (4, 0), 4: (0,), 0: (0,)}
TARGET_FILL = 0.82  # peak share of each pool the plan places
SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"  # how SQLAlchemy stores DateTime in SQLite


@dataclass(frozen=True)
class Model:
    name: str
    tenant: str
    kind: str
    product: str
    slices: int
    per_gpu: int
    mode: str
    profile: str
    rps: float

    @property
    def llm(self) -> bool:
        return any(k in self.kind for k in ("llama", "mistral", "qwen"))


def signals(model: Model, demand_rps: float, capacity_rps: float
            ) -> tuple[float, float | None, float | None]:
    """The latency, queued requests and KV cache usage the model's engine reports at this
    load: latency rising with utilisation from the profile's 100 ms; for a vLLM model a minute
    of the demand its capacity misses queued, and a KV cache filling with utilisation (none
    for Triton)."""
    utilisation = demand_rps / capacity_rps if capacity_rps > 0 else 1.5
    latency_ms = round(100.0 * (1 + utilisation ** 2), 2)
    if not model.llm:
        return latency_ms, None, None
    return (latency_ms, round(60.0 * max(0.0, demand_rps - capacity_rps), 1),
            round(min(1.0, 0.85 * utilisation), 3))


def make_models(count: int) -> list[Model]:
    kinds = list(KINDS)
    out = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        product, slices, per_gpu, mode, profile, rps = KINDS[kind]
        out.append(Model(f"{kind}-{i:03d}", f"tenant-{i % 12:02d}", kind, product, slices,
                         per_gpu, mode, profile, rps))
    return out


def demand_matrix(models: list[Model], minutes: int, start_at: datetime,
                  rng: np.random.Generator) -> np.ndarray:
    """requests/s per model (rows) and minute (columns): daily and weekly shape, bursts, noise;
    each product's pool is scaled so its peak plan fills TARGET_FILL of the pool."""
    t = np.arange(minutes)
    hour = ((start_at.hour * 60 + start_at.minute + t) % 1440) / 60.0
    day = (start_at.weekday() + (start_at.hour * 60 + t) // 1440) % 7
    weekly = np.where(day >= 5, 0.7, 1.0)
    base = rng.lognormal(0.0, 0.8, len(models))
    peak_hour = rng.uniform(12, 20, len(models))
    amplitude = rng.uniform(0.3, 0.6, len(models))
    shape = 1 + amplitude[:, None] * np.cos(2 * np.pi * (hour[None, :] - peak_hour[:, None]) / 24)
    noise = rng.lognormal(0.0, 0.06, (len(models), minutes))
    bursts = np.ones((len(models), minutes))
    for m in range(len(models)):
        for start in rng.integers(0, minutes, 6):
            width = int(rng.integers(10, 40))
            bursts[m, start:start + width] *= rng.uniform(1.3, 1.8)
    demand = base[:, None] * shape * weekly[None, :] * noise * bursts
    for _, product, gpn, nodes, *_ in POOLS:
        rows = [i for i, m in enumerate(models) if m.product == product]
        per_replica = np.array([models[i].rps for i in rows])
        per_gpu = np.array([models[i].per_gpu for i in rows])
        unit = demand[rows] / per_replica[:, None] / 0.8 / per_gpu[:, None]
        peak_gpus = float(unit.sum(axis=0).max())
        demand[rows] *= TARGET_FILL * gpn * nodes / peak_gpus
    return demand


def replicas_needed(demand: np.ndarray, models: list[Model]) -> np.ndarray:
    """Replicas per model and minute at 80% target utilization; demand is scaled down until
    every pool's whole-GPU count (per-model rounding included) stays within TARGET_FILL."""
    rps = np.array([m.rps for m in models])
    per_gpu = np.array([m.per_gpu for m in models])
    for _ in range(10):
        needed = np.maximum(1, np.ceil(demand / (rps[:, None] * 0.8))).astype(np.int64)
        gpus = np.ceil(needed / per_gpu[:, None])
        worst = 0.0
        for _, product, gpn, nodes, *_ in POOLS:
            rows = [i for i, m in enumerate(models) if m.product == product]
            worst = max(worst, float(gpus[rows].sum(axis=0).max()) / (gpn * nodes))
        if worst <= TARGET_FILL + 0.05:
            return needed
        demand *= TARGET_FILL / worst
    return needed


def node_fragments(pool: tuple[str, str, int, int, float, bool, int]) -> list[str]:
    name, product, gpn, nodes, _, mig, memory = pool
    gpus = ",".join(json.dumps({"index": i, "product": product, "memory_mib": memory,
                                "mig_capable": mig, "mig_layout": [], "sharing": "exclusive"},
                               separators=(",", ":")) for i in range(gpn))
    return [f'{{"name":"{name}-{n:04d}","pool":"{name}","product":"{product}","ready":true,'
            f'"cpu_milli":{gpn * 16000},"memory_mib":{gpn * 120000},"gpus":[{gpus}],'
            f'"cordoned":false,"labels":[]}}' for n in range(1, nodes + 1)]


def layout(models: list[Model], needed: np.ndarray, minute: int, plan_id: int
           ) -> tuple[list[tuple[object, ...]], dict[str, int]]:
    """Placement rows of one plan (homogeneous MIG/MPS/time-slice GPUs per model)."""
    rows: list[tuple[object, ...]] = []
    used = {p[1]: 0 for p in POOLS}
    for i, model in enumerate(models):
        left = int(needed[i, minute])
        while left > 0:
            gpu_id = f"{model.product}/{used[model.product]}"
            used[model.product] += 1
            for k in range(min(left, model.per_gpu)):
                start = MIG_STARTS[model.slices][k] if model.slices else 0
                rows.append((plan_id, model.name, gpu_id, model.product, model.mode,
                             model.profile, start, model.slices, model.rps))
            left -= model.per_gpu
    return rows, used


def seed(url: str, n_models: int, days: float, seed_value: int) -> dict[str, int]:
    rng = np.random.default_rng(seed_value)
    minutes = int(days * 1440)
    start_at = END_AT - timedelta(minutes=minutes)
    models = make_models(n_models)
    demand = demand_matrix(models, minutes, start_at, rng)
    needed = replicas_needed(demand, models)
    ready = np.concatenate([needed[:, :3], needed[:, :-3]], axis=1)  # 3-minute cold start lag
    ready = np.minimum(ready, needed + 0)
    store = Store.open(url, migrate=True)
    fragments = {p[0]: node_fragments(p) for p in POOLS}
    counts = {"observations": 0, "ticks": 0, "plans": 0, "placements": 0, "actions": 0,
              "forecasts": 0}
    with store.engine.begin() as connection:
        seed_static(connection, models)
    action_id = 0
    nodes_now: dict[str, int] = {}
    for day_start in range(0, minutes, 1440):
        with store.engine.begin() as connection:
            day = range(day_start, min(minutes, day_start + 1440))
            action_id, nodes_now = seed_day(connection, models, demand, needed, ready, day,
                                            start_at, fragments, counts, action_id)
        print(f"  day {day_start // 1440 + 1}: {counts}", file=sys.stderr)
    with store.engine.begin() as connection:
        seed_inventory(connection, nodes_now)
    return counts


def seed_static(connection: Connection, models: list[Model]) -> None:
    connection.execute(insert(table("models")), [{
        "name": m.name, "tenant": m.tenant,
        "isolation": "strict" if m.mode == "mig" else "none" if m.mode == "time_sliced"
        else "trusted",
        "engine": "vllm" if m.llm else "triton",
        "latency_slo_ms": 500.0, "cold_start_p50_s": 30.0, "cold_start_p90_s": 60.0,
        "profile_json": json.dumps([{"product": m.product, "compute_slices": m.slices,
                                     "batch_size": 8, "mps_processes": 2 if m.mode == "mps"
                                     else 1, "throughput_rps": m.rps, "latency_ms": 100.0,
                                     "memory_mib": 8000}])} for m in models])
    connection.execute(insert(table("gpu_prices")), [
        {"product": p[1], "price_per_gpu_hour": p[4],
         "source": "REFERENCE.md §10.1 on-demand list prices", "as_of": "2026-06"}
        for p in POOLS])


def seed_inventory(connection: Connection, nodes_by_pool: dict[str, int]) -> None:
    """The newest observed inventory (the store keeps only the latest snapshot of it)."""
    pools = [p for p in POOLS if nodes_by_pool.get(p[0], 0) > 0]
    connection.execute(insert(table("nodes")), [
        {"name": f"{p[0]}-{n:04d}", "pool": p[0], "product": p[1], "ready": True,
         "cordoned": False, "cpu_milli": p[2] * 16000, "memory_mib": p[2] * 120000,
         "updated_at": END_AT} for p in pools for n in range(1, nodes_by_pool[p[0]] + 1)])
    connection.execute(insert(table("gpus")), [
        {"node": f"{p[0]}-{n:04d}", "index": i, "product": p[1], "memory_mib": p[6],
         "mig_capable": p[5], "sharing": "exclusive", "mig_layout": ""}
        for p in pools for n in range(1, nodes_by_pool[p[0]] + 1) for i in range(p[2])])


def seed_day(connection: Connection, models: list[Model], demand: np.ndarray,
             needed: np.ndarray, ready: np.ndarray, day: range, start_at: datetime,
             fragments: dict[str, list[str]], counts: dict[str, int], action_id: int
             ) -> tuple[int, dict[str, int]]:
    observations: list[tuple[object, ...]] = []
    placements: list[tuple[object, ...]] = []
    ticks, plans, actions, outcomes, forecasts = ([] for _ in range(5))
    nodes_now: dict[str, int] = {}
    rps = np.array([m.rps for m in models])
    for minute in day:
        at = start_at + timedelta(minutes=minute)
        tick_id = minute + 1
        capacity = ready[:, minute] * rps
        rows, used = layout(models, needed, minute, tick_id)
        placements.extend(rows)
        warm = max(0, round(0.02 * sum(used.values())))
        pools_json, nodes_json, billed = [], [], 0
        for name, product, gpn, max_nodes, *_ in POOLS:
            target = min(max_nodes, math.ceil((used[product] + warm / 3) / gpn))
            nodes_now[name] = target
            pools_json.append({"name": name, "product": product, "gpus_per_node": gpn,
                               "nodes_ready": target, "nodes_pending": 0,
                               "target_nodes": target})
            nodes_json.extend(fragments[name][:target])
            billed += target * gpn
        read = [signals(m, float(demand[i, minute]), float(capacity[i]))
                for i, m in enumerate(models)]
        models_json = [{"name": m.name, "replicas_ready": int(ready[i, minute]),
                        "replicas_pending": int(needed[i, minute] - ready[i, minute]),
                        "replicas_target": int(needed[i, minute]),
                        "demand_rps": round(float(demand[i, minute]), 3),
                        "capacity_rps": float(capacity[i]), "latency_ms": read[i][0],
                        "queued_requests": read[i][1], "kv_cache_usage": read[i][2]}
                       for i, m in enumerate(models)]
        observed = (f'{{"synced_at":"{at.isoformat()}","pools":{json.dumps(pools_json)},'
                    f'"nodes":[{",".join(nodes_json)}],"models":{json.dumps(models_json)},'
                    f'"synced":true,"notes":[]}}')
        ticks.append({"id": tick_id, "started_at": at, "finished_at": at + timedelta(seconds=1),
                      "status": "applied", "reason": "", "gpus_ready": billed,
                      "demand_rps": float(demand[:, minute].sum()),
                      "capacity_rps": float(capacity.sum()), "observed_json": observed,
                      "guard_memory_json": "[]", "synced": True})
        changed = [i for i in range(len(models))
                   if minute and needed[i, minute] != needed[i, minute - 1]]
        rendered = "\n".join(f"model {models[i].name} replicas {needed[i, minute - 1]}→"
                             f"{needed[i, minute]} (forecast_p90)" for i in changed)
        plans.append({"id": tick_id, "tick_id": tick_id, "created_at": at, "revision": tick_id,
                      "dry_run": False, "cost_per_hour": 0.0, "gpus_placed": sum(used.values()),
                      "warm_gpus": warm, "unplaced_json": "[]", "rendered": rendered})
        for ordinal, i in enumerate(changed):
            action_id += 1
            actions.append({"id": action_id, "plan_id": tick_id, "ordinal": ordinal,
                            "kind": "set_replicas", "target": models[i].name,
                            "from_value": int(needed[i, minute - 1]),
                            "to_value": int(needed[i, minute]), "reason": "forecast_p90",
                            "skipped": False})
            outcomes.append({"action_id": action_id, "ok": True, "retryable": False,
                             "message": f"model {models[i].name} target {needed[i, minute]}",
                             "applied_at": at + timedelta(seconds=1)})
        stamp = at.strftime(SQLITE_TIME)
        observations.extend((m.name, stamp, float(demand[i, minute]), float(capacity[i]),
                             int(ready[i, minute]), *read[i]) for i, m in enumerate(models))
        if minute % 5 == 0:
            horizon = demand[:, minute:minute + 20]
            for i, m in enumerate(models):
                p50 = np.round(horizon[i] * (1 + 0.05 * np.sin(minute + i)), 3).tolist()
                forecasts.append({"model": m.name, "computed_at": at, "origin_at": at,
                                  "step_s": 60, "p50_json": json.dumps(p50),
                                  "p90_json": json.dumps([round(v * 1.15, 3) for v in p50]),
                                  "method": "hybrid", "fallback_reason": "",
                                  "backtest_wape": 11.0})  # a percent
    for name, batch in (("ticks", ticks), ("plans", plans), ("actions", actions),
                        ("outcomes", outcomes), ("forecasts", forecasts)):
        if batch:
            connection.execute(insert(table(name)), batch)
            counts[name] = counts.get(name, 0) + len(batch)
    # The two big tables skip per-row parameter processing: plain tuples through the
    # connection's executemany (SQLite's qmark style; times in SQLAlchemy's SQLite format).
    connection.exec_driver_sql(
        "INSERT INTO observations (model, at, demand_rps, capacity_rps, replicas_ready, "
        "latency_ms, queued_requests, kv_cache_usage) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        observations)
    connection.exec_driver_sql(
        "INSERT INTO placements (plan_id, model, gpu_id, product, mode, mig_profile, mig_start, "
        "compute_slices, throughput_rps) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", placements)
    counts["observations"] += len(observations)
    counts["placements"] += len(placements)
    return action_id, nodes_now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/headroom-bench/dashboard.db"))
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    if args.db.exists():
        sys.exit(f"{args.db} exists; remove it first (the seeder never appends)")
    args.db.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    counts = seed(f"sqlite:///{args.db}", args.models, args.days, args.seed)
    size_mb = args.db.stat().st_size / 1e6
    print(json.dumps({"db": str(args.db), "seconds": round(time.monotonic() - started, 1),
                      "size_mb": round(size_mb, 1), **counts}))


if __name__ == "__main__":
    main()
