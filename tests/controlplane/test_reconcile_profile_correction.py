"""The reconcile loop sizes a model with its profile corrected from observed load and latency:
on the simulated fleet, a model whose replicas serve 0.6 x their profile gets more replicas
than with the correction off, the correction is recorded with every tick (dry run too) and a
restarted loop decides as the stopped one did."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controlplane.autoscaling.profile_correction import DISABLED, NO_EVIDENCE, OVER_SLO
from controlplane.domain.profile import ProfileCorrection
from controlplane.domain.tick import TickStatus
from controlplane.reconcile import reconcile_once
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store

T0 = datetime(2026, 11, 30, 9, tzinfo=UTC)
MISTRAL = "mistral-7b-support"  # 18 rps per replica in its profile, 0.6 x that really


def _runtime(url: str, enabled: bool = True) -> SimRuntime:
    settings = load_settings(db={"url": url}, sim={"history_s": 6 * 3600},
                             autoscaling={"profile_correction": {"enabled": enabled}})
    return SimRuntime.open(settings, Store.open(url, migrate=True), T0)


def _mistral(profiles: tuple[ProfileCorrection, ...]) -> ProfileCorrection:
    return next(p for p in profiles if p.model == MISTRAL)


def test_a_model_serving_less_than_its_profile_gets_more_replicas_with_the_correction(
        tmp_path: Path) -> None:
    corrected = _runtime(f"sqlite:///{tmp_path / 'on.db'}")
    offline = _runtime(f"sqlite:///{tmp_path / 'off.db'}", enabled=False)
    for runtime in (corrected, offline):
        runtime.advance(15 * 60)
    on, off = (r.cluster.snapshot().model(MISTRAL) for r in (corrected, offline))
    assert on is not None and off is not None
    assert on.replicas_target > off.replicas_target
    profile = _mistral(corrected.store.last_profiles())
    assert profile.reason.startswith((OVER_SLO, f"{NO_EVIDENCE}: {profile.corrected_rps:.4g} "
                                                "rps/replica"))
    assert 0.5 <= profile.factor <= 0.6
    assert _mistral(offline.store.last_profiles()).reason == DISABLED
    # the other models serve what their profile says: nothing to correct
    assert all(p.factor == 1.0 for p in corrected.store.last_profiles() if p.model != MISTRAL)


def test_a_restarted_loop_keeps_the_correction_the_stopped_one_made(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    stopped = _runtime(url)
    stopped.advance(15 * 60)
    before = _mistral(stopped.store.last_profiles())
    assert before.factor < 1.0
    restarted = _runtime(url)
    report = restarted.tick()
    after = _mistral(report.profiles)
    assert after.corrected_rps == pytest.approx(before.corrected_rps)
    assert report.guard_memory.profile_rps == ((MISTRAL, after.corrected_rps),)


def test_a_dry_run_decides_and_records_the_same_corrections(tmp_path: Path) -> None:
    runtime = _runtime(f"sqlite:///{tmp_path / 'h.db'}")
    runtime.advance(10 * 60)
    live = runtime.store.last_profiles()
    dry = reconcile_once(runtime.deps, replace(runtime.config, dry_run=True))
    assert dry.status is TickStatus.DRY_RUN
    assert [(p.model, p.corrected_rps) for p in dry.profiles] == \
        [(p.model, p.corrected_rps) for p in live]
    assert _mistral(runtime.store.last_profiles()).factor < 1.0
