"""Helpers for the dashboard tests: seed a store with the real core, free ports, timelines."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import func, select, text, update
from sqlmodel import SQLModel
from streamlit.testing.v1 import AppTest

from controlplane.domain.guards import GuardMemory
from controlplane.domain.observed import ObservedModel, ObservedPool, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.plan import Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store, downgrade
from controlplane.store.engine import make_engine
from dashboard.markdown import WORD_JOINER

SEED_START_AT = datetime(2026, 3, 2, 21, 0, tzinfo=UTC)  # crosses midnight: two cost days
SEED_HOURS = 3.5
GAP_SEED_START_AT = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)
REPO_ROOT = Path(__file__).resolve().parents[2]
APP = str(REPO_ROOT / "dashboard" / "app.py")


def as_shown(markdown: str) -> str:
    """The text a reader sees of Streamlit markdown: backslash escapes resolved, word joiners
    (U+2060) invisible."""
    return re.sub(r"\\(.)", r"\1", markdown.replace(WORD_JOINER, ""))


def open_page(url: str, path: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The dashboard over the store at ``url`` in AppTest, on page ``path``, with no
    exception shown."""
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    at = AppTest.from_file(APP, default_timeout=120).run()
    if path != "views/overview.py":
        at.switch_page(path).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def copy_store(url: str, copy: Path) -> str:
    """The URL of a copy, at ``copy``, of the SQLite store at ``url`` (for a test to change)."""
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as source, \
            closing(sqlite3.connect(copy)) as target:
        source.backup(target)
    return f"sqlite:///{copy}"


def with_queues_read(url: str, copy: Path) -> tuple[str, dict[str, float]]:
    """The URL of a copy (at ``copy``) of the store at ``url`` with one more tick that read
    queues, as ``serve`` with a Prometheus preset does, and those queues by model: of the two
    first models that serve their demand, 31 s of its capacity waits at one (a backlog) and 29 s
    at the other (a queue that drains); the others' queues were not read."""
    copied, queued, _ = _with_engine_gauges_read(url, copy, kv_cache=False)
    return copied, queued


def with_kv_cache_read(url: str, copy: Path) -> tuple[str, dict[str, float], dict[str, float]]:
    """``with_queues_read``'s copy whose tick also read KV cache usage, as ``serve`` with the
    vLLM preset does, and the queues and usages by model: the model whose queue drains holds
    90 % of its KV cache, the third that serves its demand 97 % (full); the others' was not
    read."""
    return _with_engine_gauges_read(url, copy, kv_cache=True)


def _with_engine_gauges_read(url: str, copy: Path, kv_cache: bool
                             ) -> tuple[str, dict[str, float], dict[str, float]]:
    copied = copy_store(url, copy)
    served = _served_models(copied)
    queued = {served[0].name: 31 * served[0].capacity_rps,
              served[1].name: 29 * served[1].capacity_rps}
    usage = {served[1].name: 0.9, served[2].name: 0.97} if kv_cache else {}
    _tick_reading(copied, lambda m: replace(m, queued_requests=queued.get(m.name),
                                            kv_cache_usage=usage.get(m.name)))
    return copied, queued, usage


def with_latencies_read(url: str, copy: Path) -> tuple[str, str, str]:
    """The URL of a copy (at ``copy``) of the store at ``url`` with one more tick whose reading
    has, of the two first models that serve their demand, one 1 ms above its SLO (slow) and
    the other at it (within; the others' latencies as the tick before read them); and those two
    models."""
    copied = copy_store(url, copy)
    slow, at_slo = (m.name for m in _served_models(copied)[:2])
    slo_ms = {s.name: s.latency_slo_ms for s in Store.open(copied).model_specs()}
    latency_ms = {slow: slo_ms[slow] + 1.0, at_slo: slo_ms[at_slo]}
    _tick_reading(copied, lambda m: replace(m, latency_ms=latency_ms.get(m.name, m.latency_ms)))
    return copied, slow, at_slo


def _served_models(url: str) -> list[ObservedModel]:
    """The models of the newest reading that serve their demand, by name."""
    last = Store.open(url).last_observed()
    assert last is not None
    return sorted((m for m in last.models if 0 < m.demand_rps <= m.capacity_rps),
                  key=lambda m: m.name)


def with_a_saturated_model(url: str, copy: Path) -> tuple[str, str, float]:
    """The URL of a copy (at ``copy``) of the store at ``url`` with one more tick that read the
    first model that serves its demand finishing all its capacity serves while what its
    replicas hold grows by a quarter of that (a saturated vLLM); that model and what arrived."""
    copied = copy_store(url, copy)
    model = _served_models(copied)[0]
    _tick_reading(copied, lambda m: m if m.name != model.name else replace(
        m, demand_rps=m.capacity_rps, queue_growth_rps=m.capacity_rps / 4))
    return copied, model.name, 1.25 * model.capacity_rps


def stranded_note(model: str) -> str:
    """The note a tick writes of a model's stranded replicas (``controlplane.domain.stranded``),
    as a Kubernetes fleet's tick would write it."""
    return (f"model {model}: 2 replica(s) of 2 GPUs unscheduled: no ready node of pool a100 has "
            "2 whole GPUs free (4 free in all, at most 1 on one node); pool a100's target "
            "raised to 7 node(s) for them; a scheduler that scores nodes MostAllocated on "
            "nvidia.com/gpu packs replicas whole")


def with_unscheduled_read(url: str, copy: Path, note: Callable[[str], str]
                          ) -> tuple[str, str, str]:
    """The URL of a copy (at ``copy``) of the store at ``url`` with one more tick that read, of
    the two first models that serve their demand, 2 pods of the first that no node had bound
    (with the tick's note ``note(model)`` of them, as stranded replicas get) and 1 of the
    second, and none of the others; and those two models."""
    copied = copy_store(url, copy)
    stranded, waiting = (m.name for m in _served_models(copied)[:2])
    unscheduled = {stranded: 2, waiting: 1}
    _tick_reading(copied, lambda m: replace(m, replicas_unscheduled=unscheduled.get(m.name, 0)),
                  (note(stranded),))
    return copied, stranded, waiting


def _tick_reading(url: str, read: Callable[[ObservedModel], ObservedModel],
                  notes: tuple[str, ...] | None = None) -> None:
    """One more tick, 30 s after the newest reading, that read each model as ``read`` has it
    (and noted ``notes``; None: as the newest reading did)."""
    store = Store.open(url)
    last = store.last_observed()
    assert last is not None
    at = last.synced_at + timedelta(seconds=30)
    observed = replace(last, synced_at=at, models=tuple(read(m) for m in last.models),
                       notes=last.notes if notes is None else notes)
    store.save_observed(observed)  # as the loop stores each tick's reading
    store.save_tick(TickReport(at, at, TickStatus.APPLIED, "", observed, (), None,
                               Plan(at, (), ()), (), GuardMemory()))


def copy_store_at(url: str, copy: Path, revision: str) -> str:
    """``copy_store``, the copy then downgraded to ``revision`` (a store older than a feature)."""
    engine = make_engine(copy_store(url, copy))
    downgrade(engine, revision)
    engine.dispose()
    return f"sqlite:///{copy}"


def hour_under_capacity(url: str) -> dict[str, tuple[int, int]]:
    """Each model's observations in the hour through the newest one, and those with ready
    capacity below demand."""
    with make_engine(url).connect() as connection:
        rows = connection.execute(text(
            "SELECT model, count(*), sum(capacity_rps < demand_rps) FROM observations "
            "WHERE at >= (SELECT datetime(max(at), '-1 hour') FROM observations) "
            "GROUP BY model")).all()
    return {m: (int(n), int(short)) for m, n, short in rows}


def slo_table(url: str, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """The Overview's SLO table, by model."""
    page = open_page(url, "views/overview.py", monkeypatch)
    return next(d.value for d in page.dataframe if "status" in d.value.columns).set_index("model")


def all_models_table(url: str, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """The Models page's table of every model, by name."""
    at = open_page(url, "views/models.py", monkeypatch)
    return at.dataframe[-1].value.set_index("name")


def with_a_renamed_model(url: str, copy: Path, name: str) -> str:
    """The URL of a copy (at ``copy``) of the store at ``url`` where bert-embed is named ``name``
    and the newest plan left one of its replicas unplaced."""
    copied = copy_store(url, copy)
    with closing(sqlite3.connect(copy)) as target:
        for table, column in (("models", "name"), ("observations", "model"),
                              ("forecasts", "model"), ("placements", "model")):
            target.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = 'bert-embed'",
                           (name,))
        target.execute("UPDATE plans SET unplaced_json = ? WHERE id = (SELECT max(id) FROM plans)",
                       (json.dumps([f"{name}: 1 replica found no GPU"]),))
        target.commit()
    return copied


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


@dataclass(frozen=True)
class Gapped:
    url: str
    gap_start_at: datetime  # the last tick before the control plane was down
    gap_end_at: datetime  # the first tick after it


def seed_store_with_a_gap(url: str, down_for: timedelta,
                          state_dir: Path | None = None) -> Gapped:
    """A store the real core filled for an hour from 22:00 on 2026-03-02, whose ticks from
    22:30 on were written ``down_for`` later: the control plane was down in between.
    ``state_dir`` as for ``seed_store`` (a session-scoped caller must give one, or the fitted
    state lands in the working directory)."""
    seed_store(url, 1.0, start_at=GAP_SEED_START_AT, state_dir=state_dir)
    cut_at = GAP_SEED_START_AT + timedelta(minutes=30)
    ticks = SQLModel.metadata.tables["ticks"]
    engine = make_engine(url)
    with engine.begin() as connection:
        for tick_id, at in list(connection.execute(
                select(ticks.c.id, ticks.c.started_at).where(ticks.c.started_at >= cut_at))):
            connection.execute(update(ticks).where(ticks.c.id == tick_id)
                               .values(started_at=at + down_for))
        gap_start_at = connection.execute(select(func.max(ticks.c.started_at))
                                          .where(ticks.c.started_at < cut_at)).scalar_one()
        gap_end_at = connection.execute(select(func.min(ticks.c.started_at))
                                        .where(ticks.c.started_at >= cut_at)).scalar_one()
    engine.dispose()
    return Gapped(url, gap_start_at.replace(tzinfo=UTC), gap_end_at.replace(tzinfo=UTC))


def bert_on_one_l4_tick(at: datetime, nodes: int, demand_rps: float,
                        measured: bool = True) -> TickReport:
    """An applied tick of bert-embed on one GPU of an L4 pool of ``nodes`` x 4 GPUs, serving up
    to 600 rps, its load ``demand_rps`` (unmeasured unless ``measured``: the loop then records
    a placeholder 0)."""
    model = ObservedModel("bert-embed", 1, 0, 1, demand_rps if measured else 0.0, 600.0,
                          demand_measured=measured)
    observed = ObservedState(at, (ObservedPool("l4", "L4", 4, nodes, 0, nodes),), (), (model,))
    placement = FleetPlacement(
        revision=1,
        segments=(PlacedSegment("bert-embed", "L4-0", "L4", "exclusive", "", 0, 0, 600.0),),
        gpu_ids_by_product=(("L4", ("L4-0",)),), warm_pools=(), cost_per_hour=0.8, unplaced=())
    return TickReport(at, at + timedelta(seconds=1), TickStatus.APPLIED, "", observed, (),
                      placement, Plan(at, (), ()), (), GuardMemory(()))
