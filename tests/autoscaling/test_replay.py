"""The replay is causal and reproducible: a decision at minute m depends only on the trace
before m (forecasts, calibration and observed load alike), and a seed replays the same fleet."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from simulate_support import write_models, write_trace

from controlplane.simulation.config import load_models_file
from controlplane.simulation.engine import ORACLE, PolicyRun, SimOptions, run_policy
from controlplane.simulation.replay import DemandReplay
from controlplane.simulation.runner import PolicyKnobs, build_policy
from controlplane.simulation.trace import Trace, load_trace

OPTIONS = SimOptions(forecast_method="persistence", seed=3)


def _replay(tmp_path: Path, policy: str, trace: Trace) -> PolicyRun:
    config = load_models_file(write_models(tmp_path / "models.yaml"))
    built = build_policy(policy, trace, config, PolicyKnobs(), OPTIONS)
    return run_policy(DemandReplay(trace, OPTIONS.observe_window_s), config, built, OPTIONS)


def _trace(tmp_path: Path) -> Trace:
    return load_trace(write_trace(tmp_path / "trace.csv", steps=24))


def _decisions(run: PolicyRun, before_minute: int) -> list[tuple[str, int, float]]:
    first = run.rows[0].minute_at
    return [(r.model, r.ready_replicas, r.gpus_billed) for r in run.rows
            if (r.minute_at - first).total_seconds() < before_minute * 60]


@pytest.mark.parametrize("policy", ["predictive", "reactive"])
def test_changing_the_future_of_the_trace_changes_nothing_before_it(tmp_path: Path,
                                                                    policy: str) -> None:
    trace = _trace(tmp_path)
    cut = 150
    future = {m: np.concatenate([v[:cut], v[cut:] * 3 + 7]) for m, v in trace.rates_rps.items()}
    changed = Trace(trace.start_at, trace.step_s, future, trace.source, trace.filled)
    original_run, changed_run = _replay(tmp_path, policy, trace), _replay(tmp_path, policy, changed)
    assert _decisions(original_run, cut) == _decisions(changed_run, cut)
    assert _decisions(original_run, trace.minutes) != _decisions(changed_run, trace.minutes)


def test_the_same_seed_replays_the_same_timeline(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    first, second = _replay(tmp_path, "predictive", trace), _replay(tmp_path, "predictive", trace)
    assert first.rows == second.rows


def test_oracle_forecasts_are_benchmark_only_and_see_the_future_the_causal_ones_do_not(
        tmp_path: Path) -> None:
    assert SimOptions().oracle_forecast is False
    trace = load_trace(write_trace(tmp_path / "jump.csv", steps=24,
                                   tweak={("chat/large", 15): "400"}))  # 5 x, unforeseeable
    config = load_models_file(write_models(tmp_path / "models.yaml"))
    oracle = replace(OPTIONS, oracle_forecast=True)
    built = build_policy("predictive", trace, config, PolicyKnobs(), oracle)
    foreseen = run_policy(DemandReplay(trace, oracle.observe_window_s), config, built, oracle)
    causal = _replay(tmp_path, "predictive", trace)
    assert set(foreseen.stats.forecast_methods) == {ORACLE}
    short = [sum(r.ready_replicas * r.per_replica_rps < r.demand_rps for r in run.rows)
             for run in (foreseen, causal)]
    assert short[0] == 0 < short[1]
