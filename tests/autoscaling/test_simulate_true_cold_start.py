"""A models file's ``true_cold_start``: how long the fleet's replicas really take to start,
while the policies plan with ``cold_start`` (as the live loop plans with a model's spec)."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest
from simulate_support import MODELS_YAML, cli_app, rate, write_models, write_trace
from typer.testing import CliRunner

from controlplane.models_yaml import ModelsFileError
from controlplane.simulation.config import load_models_file, parse_cold_start_option
from controlplane.simulation.engine import cold_wake_s, fleet_models

PLANNED = "    cold_start: {p50_s: 22, p90_s: 39}\n"
#: chat/large's replicas (the first model) take 15-20 minutes to start, not the planned 22-39 s
SLOW_LARGE = MODELS_YAML.replace(
    PLANNED, PLANNED + "    true_cold_start: {p50_s: 900, p90_s: 1200}\n", 1)


def _short_minutes(tmp_path: Path, models_text: str, name: str) -> Counter[str]:
    """Per model, the minutes its ready replicas served less than its demand."""
    # chat/large's demand jumps eightfold at the third step: new nodes and replicas must start
    jump = {("chat/large", step): str(8 * rate("chat/large", step)) for step in range(3, 36)}
    trace = write_trace(tmp_path / "trace.csv", steps=36, tweak=jump)
    models = write_models(tmp_path / f"{name}.yaml", models_text)
    timeline = tmp_path / f"{name}.csv"
    result = CliRunner().invoke(cli_app(), [
        "--trace", str(trace), "--models", str(models), "--timeline-out", str(timeline),
        "--policy", "predictive", "--forecast-method", "persistence"])
    assert result.exit_code == 0, result.output
    with timeline.open() as handle:
        return Counter(row["model"] for row in csv.DictReader(handle)
                       if int(row["ready_replicas"]) * float(row["per_replica_rps"])
                       < float(row["demand_rps"]) - 1e-9)


def test_the_policies_plan_with_cold_start_and_the_fleet_draws_the_true_one(
        tmp_path: Path) -> None:
    planned = load_models_file(write_models(tmp_path / "a.yaml", MODELS_YAML))
    slow = load_models_file(write_models(tmp_path / "b.yaml", SLOW_LARGE))
    assert cold_wake_s(slow) == cold_wake_s(planned)  # the plan's wake times: cold_start's
    assert [m.rungs for m in fleet_models(slow)] == [m.rungs for m in fleet_models(planned)]
    large, small = slow.models
    assert large.true_cold_start.uncached.quantile(0.5) == 900.0
    assert large.cold_start.uncached.quantile(0.5) == 22.0
    assert small.true_cold_start is small.cold_start  # none given: cold_start is right


def test_replicas_slower_to_start_than_planned_leave_their_model_short_for_longer(
        tmp_path: Path) -> None:
    planned = _short_minutes(tmp_path, MODELS_YAML, "planned")
    slow = _short_minutes(tmp_path, SLOW_LARGE, "slow")
    assert slow["chat/large"] >= planned["chat/large"] + 10


def test_the_cold_start_option_replaces_the_planned_and_the_true_cold_start(
        tmp_path: Path) -> None:
    config = load_models_file(write_models(tmp_path / "m.yaml", SLOW_LARGE),
                              parse_cold_start_option("p50=60,p90=90"))
    large = config.models[0]
    assert large.true_cold_start.uncached.quantile(0.5) == large.cold_start.uncached.quantile(
        0.5) == 60.0


def test_a_true_cold_start_without_its_p90_is_refused_naming_the_model_and_field(
        tmp_path: Path) -> None:
    broken = write_models(tmp_path / "m.yaml", MODELS_YAML.replace(
        PLANNED, PLANNED + "    true_cold_start: {p50_s: 900}\n", 1))
    with pytest.raises(ModelsFileError) as refused:
        load_models_file(broken)
    assert "models[0] (chat/large): true_cold_start" in str(refused.value)
    assert "give samples_ms_csv or both p50_s and p90_s" in str(refused.value)
