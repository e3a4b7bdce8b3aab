"""``headroom simulate --config``: the operator's guards and budgets of ``headroom serve``'s
settings file replayed through the simulation, explicit options over the file, a bad value
refused before any simulated minute, and the keys a simulation cannot honour named."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path

import pytest
from simulate_support import (
    MODELS_YAML,
    ONE_MODEL_YAML,
    START,
    cli_app,
    write_models,
    write_trace,
)
from typer.testing import CliRunner, Result

FAST = ["--forecast-method", "persistence"]


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli_app(), list(args))


def _falling_trace(path: Path) -> Path:
    """chat/large at 40 rps (20 replicas) for 30 minutes, then 4 rps (2) for 90 minutes."""
    lines = ["ts,model,rate_rps"]
    for step in range(12):
        at = (START + timedelta(minutes=10 * step)).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{at},chat/large,{40.0 if step < 3 else 4.0}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _simulate(tmp_path: Path, name: str, config_text: str | None, *extra: str,
              policy: str = "predictive", fast: bool = True
              ) -> tuple[Result, list[dict[str, str]]]:
    """One run of the falling trace under ``policy`` (``fast``: persistence forecasts); its
    result and timeline rows."""
    trace = _falling_trace(tmp_path / "falling.csv")
    models = write_models(tmp_path / "models.yaml", ONE_MODEL_YAML)
    out = tmp_path / f"{name}.csv"
    config = []
    if config_text is not None:
        (tmp_path / f"{name}.yaml").write_text(config_text)
        config = ["--config", str(tmp_path / f"{name}.yaml")]
    result = _invoke("--trace", str(trace), "--models", str(models), "--timeline-out", str(out),
                     "--policy", policy, "--json", *(FAST if fast else []), *config, *extra)
    if result.exit_code != 0:
        return result, []
    with out.open() as handle:
        return result, list(csv.DictReader(handle))


def _ready(rows: list[dict[str, str]]) -> list[int]:
    return [int(r["ready_replicas"]) for r in rows]


def _most_removed_within(ready: list[int], minutes: int) -> int:
    """The most replicas the timeline loses over any ``minutes`` consecutive minutes."""
    return max(ready[m - minutes] - ready[m] for m in range(minutes, len(ready)))


@pytest.mark.parametrize("policy", ["predictive", "reactive", "static"])
def test_an_empty_config_leaves_the_timeline_and_summary_byte_identical(
        tmp_path: Path, policy: str) -> None:
    trace = write_trace(tmp_path / "trace.csv", steps=6)
    models = write_models(tmp_path / "models.yaml")
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "groups.yaml").write_text("safety: {}\nautoscaling: {}\nreconcile: {}\n")
    runs = {}
    for name, config in (("none", []), ("empty", ["--config", str(tmp_path / "empty.yaml")]),
                         ("groups", ["--config", str(tmp_path / "groups.yaml")])):
        result = _invoke("--trace", str(trace), "--models", str(models), "--timeline-out",
                         str(tmp_path / f"{name}.csv"), "--policy", policy, "--json", *FAST,
                         *config)
        assert result.exit_code == 0, result.output
        runs[name] = ((tmp_path / f"{name}.csv").read_bytes(),
                      json.loads(result.stdout)["policies"])
    assert runs["empty"] == runs["none"]
    assert runs["groups"] == runs["none"]


def test_a_replica_disruption_budget_removes_fewer_replicas_per_window(tmp_path: Path) -> None:
    _, free = _simulate(tmp_path, "free", None)
    _, guarded = _simulate(tmp_path, "guarded", "safety:\n  replica_disruption_budget: 2\n"
                           "  disruption_window_s: 600\n")
    assert _ready(free)[:25] == _ready(guarded)[:25]  # the same fleet until demand falls
    assert _most_removed_within(_ready(free), 10) >= 10  # free: 20 -> 2 within minutes
    assert _most_removed_within(_ready(guarded), 10) <= 2  # at most 2 per 600 s
    assert _ready(guarded)[45] > _ready(free)[45]


def test_a_scale_down_cooldown_holds_the_replicas_after_a_scale_up(tmp_path: Path) -> None:
    # the replicas rise in the first minutes, then demand falls at minute 30
    _, free = _simulate(tmp_path, "free", None)
    _, cooled = _simulate(tmp_path, "cooled", "safety: {scale_down_cooldown_s: 3600}\n")
    peak = max(_ready(cooled))
    assert max(_ready(free)) == peak
    assert max(_ready(free)[40:60]) < peak  # free: down within minutes of the fall
    assert min(_ready(cooled)[5:60]) == peak  # held for the hour after the scale-up
    assert max(_ready(cooled)[66:]) < peak  # then they go


def test_a_max_replica_step_limits_the_replicas_removed_per_tick(tmp_path: Path) -> None:
    _, stepped = _simulate(tmp_path, "stepped", "safety: {max_replica_step: 1}\n",
                           "--tick-s", "60")
    _, free = _simulate(tmp_path, "free", None, "--tick-s", "60")
    assert _most_removed_within(_ready(free), 1) >= 5
    assert _most_removed_within(_ready(stepped), 1) <= 1  # one tick a minute, one replica


def test_a_cluster_gpu_budget_caps_the_gpus_billed(tmp_path: Path) -> None:
    _, free = _simulate(tmp_path, "free", None)
    result, capped = _simulate(tmp_path, "capped", "safety: {cluster_gpu_budget: 8}\n")
    assert max(float(r["gpus_billed"]) for r in free) >= 16
    assert max(float(r["gpus_billed"]) for r in capped) <= 8
    assert max(_ready(capped)) <= 8
    summary = json.loads(result.stdout)["policies"]["predictive"]
    assert summary["short_model_minutes"] > 0  # 40 rps needs 20 GPUs: the budget shows


def test_the_configs_tenant_budget_replaces_the_models_files(tmp_path: Path) -> None:
    _, capped = _simulate(tmp_path, "capped", "autoscaling:\n  tenant_gpu_budgets: {acme: 6}\n")
    assert max(_ready(capped)) <= 6


def _swapping_trace(path: Path) -> Path:
    """chat/large and chat/small at 40 rps for 30 minutes, then chat/large at 4 rps while
    chat/small rises to 800 rps (the reactive policy at 80 %: large 25 replicas, then 3; small
    2, then 25, half a GPU each)."""
    lines = ["ts,model,rate_rps"]
    for step in range(12):
        at = (START + timedelta(minutes=10 * step)).strftime("%Y-%m-%d %H:%M:%S")
        lines += [f"{at},chat/large,{40.0 if step < 3 else 4.0}",
                  f"{at},chat/small,{40.0 if step < 3 else 800.0}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_tenant_budget_holds_while_the_disruption_budget_keeps_another_models_replicas(
        tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("safety:\n  replica_disruption_budget: 2\n"
                      "autoscaling:\n  tenant_gpu_budgets: {acme: 30}\n")
    result = _invoke("--trace", str(_swapping_trace(tmp_path / "swap.csv")), "--models",
                     str(write_models(tmp_path / "models.yaml", MODELS_YAML)), "--timeline-out",
                     str(tmp_path / "out.csv"), "--policy", "reactive", "--json",
                     "--config", str(config))
    assert result.exit_code == 0, result.output
    with (tmp_path / "out.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    ready = {(r["minute"], r["model"]): int(r["ready_replicas"]) for r in rows}
    minutes = sorted({r["minute"] for r in rows})
    # acme's GPUs: large takes a whole GPU a replica, two of small share one; large's replicas
    # go 2 per 600 s, and small grows only into the GPUs they leave (without the hold: 38)
    gpus = [ready[m, "chat/large"] + -(-ready[m, "chat/small"] // 2) for m in minutes]
    assert max(gpus) == 30
    assert ready[minutes[-1], "chat/small"] == 25  # all it wants, once large has gone
    held = json.loads(result.stdout)["policies"]["reactive"]["held_by_guards"]
    assert held["tenant_gpu_budget:acme"] > 0 and held["disruption_budget"] > 0


def test_explicit_options_override_the_configs_values(tmp_path: Path) -> None:
    config = "autoscaling: {reactive_target_utilization: 0.4}\nreconcile: {interval_s: 60}\n"
    _, default = _simulate(tmp_path, "default", None, policy="reactive")
    _, from_config = _simulate(tmp_path, "from_config", config, policy="reactive")
    _, overridden = _simulate(tmp_path, "overridden", config, "--reactive-target", "0.8",
                              "--tick-s", "30", policy="reactive")
    assert max(_ready(from_config)) > max(_ready(default))  # 0.4: twice the replicas
    assert (tmp_path / "overridden.csv").read_bytes() == (tmp_path / "default.csv").read_bytes()
    assert overridden == default


def test_the_configs_policy_is_simulated_when_no_policy_is_given(tmp_path: Path) -> None:
    trace = _falling_trace(tmp_path / "falling.csv")
    models = write_models(tmp_path / "models.yaml", ONE_MODEL_YAML)
    (tmp_path / "c.yaml").write_text("autoscaling: {policy: reactive}\n")
    result = _invoke("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(tmp_path / "T.csv"), "--json", "--config", str(tmp_path / "c.yaml"),
                     *FAST)
    assert result.exit_code == 0, result.output
    assert list(json.loads(result.stdout)["policies"]) == ["reactive"]


@pytest.mark.parametrize(("config_text", "message"), [
    ("safety: {max_replica_step: 0}\n",
     "safety.max_replica_step: Input should be greater than or equal to 1"),
    ("safety: {scale_down_cooldown_s: -5}\n",
     "safety.scale_down_cooldown_s: Input should be greater than or equal to 0"),
    ("safety: {replica_disruption_budget: lots}\n",
     "safety.replica_disruption_budget: Input should be a valid integer"),
    ("safety: {cluster_gpu_budgets: 8}\n", "safety.cluster_gpu_budgets: unknown key"),
    ("reconcile: {interval_s: 7}\n",
     "reconcile.interval_s: must divide a minute into whole ticks"),
    ("forecast: {interval_s: 30}\n", "forecast.interval_s: must be >= 60"),
    ("forecast: {method: crystal-ball}\n", "forecast.method: unknown forecast method"),
    ("autoscaling: {shortfall_cost_ratio: 0.5}\n",
     "autoscaling.shortfall_cost_ratio: Input should be greater than 1"),
    ("autoscaling:\n  tenant_gpu_budgets: {globex: 4}\n",
     "autoscaling.tenant_gpu_budgets.globex: no model belongs to tenant 'globex'"),
    ("safety: [1, 2]\n", "safety: Input should be a valid dictionary"),
    ("safety:\n  max_node_step: 2\n  max_node_step: 3\n", "line 3"),
], ids=["replica step 0", "negative cooldown", "budget not a number", "misspelt key",
        "tick not dividing a minute", "forecast interval below a minute", "unknown method",
        "shortfall ratio below 1", "budget of an unknown tenant", "group not a mapping",
        "key given twice"])
def test_a_bad_config_is_refused_before_any_simulation_naming_file_and_field(
        tmp_path: Path, config_text: str, message: str) -> None:
    result, _ = _simulate(tmp_path, "bad", config_text, fast=False)  # --forecast-method wins
    assert result.exit_code == 2, result.output
    line = " ".join(result.stderr.split())
    assert f"error: {tmp_path / 'bad.yaml'}:" in line
    assert message in line
    assert "Traceback" not in result.output
    assert not (tmp_path / "bad.csv").exists()


def test_a_missing_config_file_is_refused_naming_it(tmp_path: Path) -> None:
    trace = _falling_trace(tmp_path / "falling.csv")
    models = write_models(tmp_path / "models.yaml", ONE_MODEL_YAML)
    result = _invoke("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(tmp_path / "T.csv"), "--config", str(tmp_path / "nope.yaml"), *FAST)
    assert result.exit_code == 2
    assert f"{tmp_path / 'nope.yaml'}: no such config file" in " ".join(result.stderr.split())


def test_keys_simulate_cannot_honour_are_named_on_one_stderr_line(tmp_path: Path) -> None:
    serve_config = ("backend: kubernetes\ndb: {url: 'postgresql+psycopg://u@127.0.0.1:5432/t'}\n"
                    "prometheus: {url: 'http://127.0.0.1:9090'}\n"
                    "safety: {dry_run: true, replica_disruption_budget: 2}\n")
    result, rows = _simulate(tmp_path, "serve", serve_config)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True  # stdout keeps its one JSON document
    notes = [line for line in result.stderr.splitlines() if "ignores" in line]
    assert len(notes) == 1, result.stderr
    note = notes[0]
    for key in ("backend", "db.url", "prometheus.url", "safety.dry_run"):
        assert key in note
    assert "replica_disruption_budget" not in note  # honoured, so not listed
    assert _most_removed_within(_ready(rows), 10) <= 2


def test_a_config_of_only_honoured_keys_prints_no_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADROOM_FORECAST__STATE_DIR")  # the tests' own, not simulated
    result, _ = _simulate(tmp_path, "quiet", "safety: {max_node_step: 4}\n")
    assert result.exit_code == 0, result.output
    assert "ignores" not in result.stderr


def test_the_configs_profile_correction_runs_and_the_flag_turns_it_on(tmp_path: Path) -> None:
    trace = _falling_trace(tmp_path / "falling.csv")
    models = write_models(tmp_path / "models.yaml", ONE_MODEL_YAML.replace(
        "per_replica_rps: 2.0", "per_replica_rps: 2.0\n    true_per_replica_rps: 0.5"))
    (tmp_path / "on.yaml").write_text("autoscaling: {profile_correction: {enabled: true}}\n")
    (tmp_path / "off.yaml").write_text("autoscaling: {profile_correction: {enabled: false}}\n")
    timelines = {}
    for name, args in (("default", []), ("flag", ["--profile-correction"]),
                       ("config", ["--config", str(tmp_path / "on.yaml")]),
                       ("flag_over_off", ["--config", str(tmp_path / "off.yaml"),
                                          "--profile-correction"])):
        result = _invoke("--trace", str(trace), "--models", str(models), "--timeline-out",
                         str(tmp_path / f"{name}.csv"), "--json", *FAST, *args)
        assert result.exit_code == 0, result.output
        timelines[name] = ((tmp_path / f"{name}.csv").read_bytes(),
                           json.loads(result.stdout)["policies"]["predictive"])
    assert "profile_rps_in_use" not in timelines["default"][1]
    assert "chat/large" in timelines["flag"][1]["profile_rps_in_use"]  # the correction ran
    assert timelines["config"] == timelines["flag"]  # the same defaults as the flag's
    assert timelines["flag_over_off"] == timelines["flag"]


def test_a_forecast_interval_above_the_forecast_age_limit_is_refused_before_any_minute(
        tmp_path: Path) -> None:
    result, _ = _simulate(tmp_path, "seldom", None, "--forecast-interval-s", "3600")
    assert result.exit_code == 2, result.output
    line = " ".join(result.stderr.split())
    assert ("--forecast-interval-s must be <= reconcile.max_forecast_age_s (1800 s), got 3600"
            in line)
    assert not (tmp_path / "seldom.csv").exists()


def test_the_configs_forecast_age_limit_is_checked_against_the_command_lines_interval(
        tmp_path: Path) -> None:
    result, _ = _simulate(tmp_path, "young", "reconcile: {max_forecast_age_s: 600}\n",
                          "--forecast-interval-s", "900")
    assert result.exit_code == 2, result.output
    assert ("--forecast-interval-s must be <= reconcile.max_forecast_age_s (600 s), got 900"
            in " ".join(result.stderr.split()))
    accepted, rows = _simulate(tmp_path, "ok", "reconcile: {max_forecast_age_s: 600}\n",
                               "--forecast-interval-s", "600")
    assert accepted.exit_code == 0, accepted.output
    assert rows


def test_a_reactive_run_takes_any_forecast_interval(tmp_path: Path) -> None:
    result, rows = _simulate(tmp_path, "reactive", None, "--forecast-interval-s", "3600",
                             policy="reactive")
    assert result.exit_code == 0, result.output
    assert rows
