"""Helpers for the dashboard tests: seed a store with the real core, free ports, timelines."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store

SEED_START_AT = datetime(2026, 3, 2, 21, 0, tzinfo=UTC)  # crosses midnight: two cost days
SEED_HOURS = 3.5
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Seeded:
    url: str
    end_at: datetime
    sim_gpu_hours: float  # what the simulated fleet billed, by its own accounting
    sim_cost_usd: float


def seed_store(url: str, hours: float, start_at: datetime = SEED_START_AT,
               dry_run: bool = False, state_dir: Path | None = None,
               start_warm: bool = True) -> SimRuntime:
    """Run the real reconcile core on the simulated fleet for ``hours`` simulated hours.
    ``state_dir``: where the forecast refreshes keep fitted state, for a session-scoped caller
    (a test's own comes from tests/conftest.py). ``start_warm``: False starts on empty pools."""
    own: dict[str, Any] = ({"forecast": {"state_dir": str(state_dir)}} if state_dir is not None
                           else {})
    settings = load_settings(db={"url": url}, sim={"history_s": 6 * 3600,
                                                   "start_warm": start_warm},
                             safety={"dry_run": dry_run}, **own)
    store = Store.open(url, migrate=True)
    runtime = SimRuntime.open(settings, store, start_at)
    runtime.advance(hours * 3600)
    return runtime


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_timeline(path: Path, minutes: int, replicas: int, gpus_billed: int,
                   demand_rps: float = 100.0, per_replica_rps: float = 40.0) -> Path:
    """A `headroom simulate` timeline for two models with a demand step at minute 10."""
    lines = ["minute,model,demand_rps,ready_replicas,per_replica_rps,gpu_per_replica,gpus_billed"]
    for minute in range(minutes):
        demand = demand_rps * (2 if minute >= 10 else 1)
        lines.append(f"{minute},chat,{demand},{replicas},{per_replica_rps},0.4286,{gpus_billed}")
        lines.append(f"{minute},embed,10.0,1,50.0,1.0,{gpus_billed}")
    path.write_text("\n".join(lines) + "\n")
    return path
