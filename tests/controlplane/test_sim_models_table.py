"""The demo's (and ``serve --backend sim``'s) models are its store's models table, as
``serve --backend kubernetes``'s are: a new store gets the six demo models, a resumed one keeps
the operator's edits, and each tick picks up ``models import`` / ``models remove`` through
serve's reload (a table its checks refuse is logged and the models in use stay). Real core,
simulated fleet, in-process placement, SQLite."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from controlplane.domain.models import ModelSpec
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.hints import remove_model_and_hints

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
LLAMA = "llama-3-8b-chat"  # about 14 replicas from its demand at this hour
WHISPER = "whisper-asr"


def _open(url: str, **sim: object) -> SimRuntime:
    settings = load_settings(db={"url": url}, sim={"history_s": 3600, "start_warm": True,
                                                   "true_throughput_factor": {}, **sim})
    return SimRuntime.open(settings, Store.open(url, migrate=True), T0)


def _demo(name: str) -> ModelSpec:
    return next(s for s in DEMO_MODELS if s.name == name)


def _targets(runtime: SimRuntime) -> dict[str, int]:
    return {m.name: m.replicas_target for m in runtime.cluster.snapshot().models}


def test_a_new_store_gets_the_six_demo_models() -> None:
    runtime = _open("sqlite://")
    assert sorted(runtime.store.model_names()) == sorted(s.name for s in DEMO_MODELS)
    assert sorted(_targets(runtime)) == sorted(s.name for s in DEMO_MODELS)


def test_a_resumed_store_keeps_the_bounds_imported_between_runs(sqlite_url: str) -> None:
    first = _open(sqlite_url)
    first.advance(2 * 60)
    first.store.upsert_models([replace(_demo(LLAMA), min_replicas=6, max_replicas=8)])
    first.store.engine.dispose()

    resumed = _open(sqlite_url)
    stored = {s.name: s for s in resumed.store.model_specs()}
    assert (stored[LLAMA].min_replicas, stored[LLAMA].max_replicas) == (6, 8)
    assert {s.name: s for s in resumed.specs}[LLAMA].max_replicas == 8
    resumed.advance(5 * 60)
    assert _targets(resumed)[LLAMA] == 8


def test_bounds_imported_while_the_loop_runs_are_used_at_the_next_tick(
        sqlite_url: str) -> None:
    runtime = _open(sqlite_url)
    runtime.advance(2 * 60)
    assert _targets(runtime)[LLAMA] > 8
    runtime.store.upsert_models([replace(_demo(LLAMA), max_replicas=8)])
    runtime.advance(5 * 60)
    assert _targets(runtime)[LLAMA] == 8
    assert {m.spec.name: m.spec for m in runtime.config.models}[LLAMA].max_replicas == 8


def test_a_model_removed_while_the_loop_runs_is_no_longer_run_sized_or_billed(
        sqlite_url: str) -> None:
    runtime = _open(sqlite_url)
    runtime.advance(2 * 60)
    assert _targets(runtime)[WHISPER] > 0
    assert remove_model_and_hints(runtime.store.engine, WHISPER, T0) is not None
    report = runtime.tick()
    assert WHISPER not in _targets(runtime)
    assert report.observed.model(WHISPER) is None
    assert report.placement is not None
    assert WHISPER not in {s.model for s in report.placement.segments}
    billed = runtime.tally.models[WHISPER].gpu_s
    runtime.advance(60)
    assert runtime.tally.models[WHISPER].gpu_s == billed


def test_a_model_the_demo_has_no_traffic_for_is_managed_with_no_load(sqlite_url: str) -> None:
    runtime = _open(sqlite_url)
    runtime.advance(60)
    runtime.store.upsert_models([replace(_demo(WHISPER), name="whisper-large")])
    runtime.advance(2 * 60)
    model = runtime.cluster.snapshot().model("whisper-large")
    assert model is not None and model.demand_rps == 0.0
    assert "whisper-large" in {m.spec.name for m in runtime.config.models}


def test_a_table_serves_checks_refuse_is_logged_and_the_models_in_use_stay(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime = _open(sqlite_url)
    runtime.advance(60)
    for spec in DEMO_MODELS:  # no model at all: serve refuses such a table
        remove_model_and_hints(runtime.store.engine, spec.name, T0)
    with caplog.at_level(logging.ERROR, logger="headroom.models"):
        runtime.advance(60)
    assert [r.getMessage() for r in caplog.records] == ["models.reload_refused"]
    assert sorted(_targets(runtime)) == sorted(s.name for s in DEMO_MODELS)
    assert len(runtime.config.models) == len(DEMO_MODELS)
