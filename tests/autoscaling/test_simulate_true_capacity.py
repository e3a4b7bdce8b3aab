"""``headroom simulate`` with a mis-profiled model: the models file's ``true_per_replica_rps`` is
what a replica really serves, the timeline reports it, and the predictive policy with
``--profile-correction`` learns it from the simulated latency as the live loop does."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from simulate_support import MODELS_YAML, cli_app, write_models, write_trace
from typer.testing import CliRunner

from controlplane.autoscaling.profile_correction import CorrectionConfig
from controlplane.simulation.config import ModelsFileError, load_models_file
from controlplane.simulation.engine import PolicyRun, SimOptions, run_policy
from controlplane.simulation.replay import DemandReplay
from controlplane.simulation.runner import PolicyKnobs, build_policy
from controlplane.simulation.timeline import summarize
from controlplane.simulation.trace import load_trace

OPTIONS = SimOptions(forecast_method="persistence", seed=3)
LARGE = "    per_replica_rps: 2.0\n"


def _with_true(true_rps: str, extra: str = "") -> str:
    return MODELS_YAML.replace(LARGE, f"{LARGE}    true_per_replica_rps: {true_rps}\n{extra}", 1)


def _run(tmp_path: Path, models_text: str, policy: str, steps: int,
         options: SimOptions = OPTIONS) -> PolicyRun:
    trace = load_trace(write_trace(tmp_path / "trace.csv", steps=steps))
    config = load_models_file(write_models(tmp_path / "models.yaml", models_text))
    built = build_policy(policy, trace, config, PolicyKnobs(), options)
    return run_policy(DemandReplay(trace, options.observe_window_s), config, built, options)


def _short(run: PolicyRun, model: str) -> int:
    return sum(1 for r in run.rows if r.model == model
               and r.ready_replicas * r.per_replica_rps < r.demand_rps)


@pytest.mark.parametrize(("text", "message"), [
    (_with_true("0"), "models[0] (chat/large): true_per_replica_rps: must be > 0, got 0"),
    (_with_true("-1.5"), "models[0] (chat/large): true_per_replica_rps: must be > 0, got -1.5"),
    (_with_true(".nan"), "models[0] (chat/large): true_per_replica_rps: must be > 0, got nan"),
    (_with_true("1.0", "    latency_ms: 1200\n"),
     "models[0] (chat/large): latency_ms: the unloaded latency must be below latency_slo_ms "
     "(1000), got 1200"),
    (_with_true("1.0", "    latency_slo_ms: 0\n"),
     "models[0] (chat/large): latency_slo_ms: must be > 0, got 0"),
    (MODELS_YAML.replace("per_replica_rps: 2.0", "per_replica_rps: true"),
     "models[0] (chat/large): per_replica_rps: expected a number, got true"),
    (MODELS_YAML.replace("gpu_per_replica: 1.0", "gpu_per_replica: false"),
     "models[0] (chat/large): gpu_per_replica: expected a number, got false"),
    (MODELS_YAML.replace("per_replica_rps: 2.0", "per_replica_rps: '2.0'"),
     "models[0] (chat/large): per_replica_rps: expected a number, got '2.0' (quoted: text, not "
     "a number)"),
], ids=["zero", "negative", "nan", "unloaded above the slo", "zero slo",
        "a yaml true for the throughput", "a yaml false for the gpu share",
        "a quoted throughput"])
def test_a_bad_true_throughput_or_latency_is_refused_naming_the_model_and_field(
        tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ModelsFileError) as error:
        load_models_file(write_models(tmp_path / "models.yaml", text))
    assert message in str(error.value)


def test_without_a_true_throughput_a_model_serves_its_profile_with_the_documented_latency(
        tmp_path: Path) -> None:
    model = load_models_file(write_models(tmp_path / "models.yaml")).model("chat/large")
    assert (model.true_rps, model.true_per_replica_rps) == (None, 2.0)
    assert (model.latency_slo_ms, model.latency_ms) == (1000.0, 300.0)


def test_the_timeline_and_summary_report_the_true_throughput_not_the_profile(
        tmp_path: Path) -> None:
    run = _run(tmp_path, _with_true("1.2"), "reactive", steps=6)
    large = [r for r in run.rows if r.model == "chat/large"]
    assert {r.per_replica_rps for r in large} == {1.2}
    assert {r.per_replica_rps for r in run.rows if r.model == "chat/small"} == {40.0}
    config = load_models_file(tmp_path / "models.yaml")
    lower = sum(r.demand_rps / r.per_replica_rps * r.gpu_per_replica for r in run.rows) / 60
    assert summarize(run, config)["gpu_hours_lower_bound"] == round(lower, 3)
    # the reactive policy sizes on the offline 2.0 x 0.8, above the true 1.2: it runs short
    assert _short(run, "chat/large") > 0


def test_a_true_throughput_equal_to_the_profile_replays_exactly_as_none_given(
        tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = _run(tmp_path / "a", MODELS_YAML, "predictive", steps=6)
    same = _run(tmp_path / "b", _with_true("2.0"), "predictive", steps=6)
    assert plain.rows == same.rows
    assert summarize(plain, load_models_file(tmp_path / "a" / "models.yaml")) == summarize(
        same, load_models_file(tmp_path / "b" / "models.yaml"))


def test_correction_gives_a_model_serving_six_tenths_of_its_profile_fewer_short_minutes(
        tmp_path: Path) -> None:
    """12 hours: the predictive policy's headroom hides part of the error, not all of it."""
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    off = _run(tmp_path / "off", _with_true("1.2"), "predictive", steps=72)
    on = _run(tmp_path / "on", _with_true("1.2"), "predictive", steps=72,
              options=replace(OPTIONS, profile_correction=CorrectionConfig()))
    short_off, short_on = _short(off, "chat/large"), _short(on, "chat/large")
    assert short_off >= 30  # of 720 minutes (44 when written)
    assert short_on < short_off / 3
    # over-SLO evidence within the hysteresis of the value in use does not lower it: the value
    # ends at most 1 / 0.95 x the true 1.2 (1.2214 when written)
    assert 0.5 * 2.0 <= on.stats.profile_rps["chat/large"] < 1.2 / 0.95
    assert off.stats.profile_rps == {}
    low, high = on.stats.profile_rps_range["chat/large"]
    assert (low, high) == (min(low, on.stats.profile_rps["chat/large"]), 2.0)
    assert 0 < on.stats.profile_corrected_ticks["chat/large"] < on.stats.ticks
    summary = summarize(on, load_models_file(tmp_path / "on" / "models.yaml"))
    assert summary["profile_rps_range"]["chat/large"] == [round(low, 4), 2.0]
    assert summary["profile_corrected_ticks"]["chat/large"] == (
        on.stats.profile_corrected_ticks["chat/large"])


def test_correction_leaves_a_model_serving_its_profile_sized_on_its_profile_every_tick(
        tmp_path: Path) -> None:
    on = _run(tmp_path, _with_true("2.0"), "predictive", steps=12,
              options=replace(OPTIONS, profile_correction=CorrectionConfig()))
    summary = summarize(on, load_models_file(tmp_path / "models.yaml"))
    assert summary["profile_rps_range"] == {"chat/large": [2.0, 2.0], "chat/small": [40.0, 40.0]}
    assert summary["profile_corrected_ticks"] == {"chat/large": 0, "chat/small": 0}


def test_the_cli_option_corrects_the_predictive_policy_only_and_reports_the_value_in_use(
        tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace.csv", steps=6)
    models = write_models(tmp_path / "models.yaml", _with_true("1.2"))
    done = CliRunner().invoke(cli_app(), [
        "--trace", str(trace), "--models", str(models), "--timeline-out", str(tmp_path / "T.csv"),
        "--forecast-method", "persistence", "--policy", "predictive", "--policy", "reactive",
        "--profile-correction", "--json"])
    assert done.exit_code == 0, done.output
    policies = json.loads(done.stdout)["policies"]
    assert set(policies["predictive"]["profile_rps_in_use"]) == {"chat/large", "chat/small"}
    assert "profile_rps_in_use" not in policies["reactive"]
    timeline = (tmp_path / "T.predictive.csv").read_text().splitlines()
    assert timeline[0] == ("minute,model,demand_rps,ready_replicas,per_replica_rps,"
                           "gpu_per_replica,gpus_billed,gpu_product,product_gpus_billed")
    assert timeline[1].split(",")[1:5:3] == ["chat/large", "1.2"]
