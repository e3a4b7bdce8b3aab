"""``headroom simulate`` on traces and settings at the edge of what it accepts: regular traces
whose times are not on whole minutes, targets and throughputs no fleet can be sized for, and a
summary that stays one strict JSON document."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path

import pytest
from simulate_support import MODELS_YAML, ONE_MODEL_YAML, START, cli_app, rate, write_models
from typer.testing import CliRunner

from controlplane.simulation.timeline import _ratio
from controlplane.simulation.trace import TraceError, load_trace

FAST = ["--forecast-method", "persistence"]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli_app(), list(args))
    return result.exit_code, result.output


def _trace(path: Path, offsets_s: list[float], step_s: int = 600,
           model: str = "chat/large") -> Path:
    """One model's rows at START + step x i + offsets_s[i] seconds."""
    lines = ["ts,model,rate_rps"]
    for step, offset_s in enumerate(offsets_s):
        at = START + timedelta(seconds=step_s * step + offset_s)
        lines.append(f"{at.isoformat()},{model},{rate(model, step)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_ten_minute_trace_scraped_at_53_seconds_past_the_minute_replays_each_step_whole(
        tmp_path: Path) -> None:
    trace = load_trace(_trace(tmp_path / "t53.csv", [53.0] * 6), models=["chat/large"])
    assert trace.start_at == START  # the minute of the first row
    values = trace.rates_rps["chat/large"]
    assert len(values) == 60
    assert [values[10 * step] for step in range(6)] == [rate("chat/large", s) for s in range(6)]
    assert all(values[10 * step + m] == values[10 * step] for step in range(6) for m in range(10))


def test_a_one_minute_trace_with_scrape_jitter_replays_every_minute_in_order(
        tmp_path: Path) -> None:
    jitter_s = [0.0, 2.0, 1.0, 0.0, 2.5, 1.5, 0.0, 2.0]
    trace = load_trace(_trace(tmp_path / "jitter.csv", jitter_s, step_s=60),
                       models=["chat/large"])
    assert list(trace.rates_rps["chat/large"]) == [rate("chat/large", s) for s in range(8)]


@pytest.mark.parametrize(("value_unit", "per_rps"), [("rps", 1.0), ("rpm", 60.0),
                                                   ("per-step", 600.0)])
def test_a_trace_in_requests_per_minute_or_per_step_replays_as_requests_per_second(
        tmp_path: Path, value_unit: str, per_rps: float) -> None:
    path = _trace(tmp_path / "t.csv", [0.0] * 3)  # 10-minute steps
    trace = load_trace(path, models=["chat/large"], value_unit=value_unit)
    assert [trace.rates_rps["chat/large"][10 * step] for step in range(3)] == pytest.approx(
        [rate("chat/large", step) / per_rps for step in range(3)])


def test_a_value_unit_that_is_none_of_rps_rpm_per_step_is_refused_naming_the_option(
        tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="--value-unit must be rps, rpm or per-step, got 'rph'"):
        load_trace(_trace(tmp_path / "t.csv", [0.0] * 3), models=["chat/large"],
                   value_unit="rph")


def test_a_row_far_off_the_grid_its_first_time_starts_is_refused_naming_its_line(
        tmp_path: Path) -> None:
    path = _trace(tmp_path / "off.csv", [53.0, 53.0, 53.0 + 240, 53.0, 53.0, 53.0, 53.0])
    with pytest.raises(TraceError, match=r"off\.csv: line 4: time .* is \+240s off the "
                                         r"trace's 600s grid, which starts at its first time"):
        load_trace(path, models=["chat/large"])


def test_a_model_on_a_grid_five_minutes_after_the_others_is_named_by_its_own_line(
        tmp_path: Path) -> None:
    path = tmp_path / "two.csv"
    rows = ["ts,model,rate_rps"]
    for step in range(4):
        at = START + timedelta(minutes=10 * step)
        rows.append(f"{at.isoformat()},chat/large,{rate('chat/large', step)}")
        rows.append(f"{(at + timedelta(minutes=5)).isoformat()},chat/small,"
                    f"{rate('chat/small', step)}")
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(TraceError, match=r"line 3: time .* off the trace's 600s grid"):
        load_trace(path, models=["chat/large", "chat/small"])


def test_a_tiny_reactive_target_that_no_pool_could_hold_is_refused_naming_the_option(
        tmp_path: Path) -> None:
    trace = _trace(tmp_path / "trace.csv", [0.0] * 6)
    models = write_models(tmp_path / "models.yaml", ONE_MODEL_YAML)
    code, out = _run("--trace", str(trace), "--models", str(models), "--policy", "reactive",
                     "--reactive-target", "1e-9", "--timeline-out", str(tmp_path / "T.csv"),
                     *FAST)
    assert code == 2, out
    text = " ".join(out.split())
    assert "model 'chat/large': its peak of" in text
    assert "at --reactive-target 1e-09, more than the 100,000 GPUs of a pool" in text
    assert not (tmp_path / "T.csv").exists()


def test_a_per_replica_rate_beyond_any_replica_is_refused_naming_the_model_and_field(
        tmp_path: Path) -> None:
    trace = _trace(tmp_path / "trace.csv", [0.0] * 6)
    models = write_models(tmp_path / "models.yaml", ONE_MODEL_YAML.replace(
        "per_replica_rps: 2.0", "per_replica_rps: 1.0e+308"))
    code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(tmp_path / "T.csv"), *FAST)
    assert code == 2, out
    assert ("models[0] (chat/large): per_replica_rps: must be at most 1e+07 requests/s per "
            "replica, got 1e+308") in " ".join(out.split())


def test_a_ratio_to_a_lower_bound_too_small_for_a_finite_number_is_none_not_infinity() -> None:
    assert _ratio(12.0, 0.0) is None
    assert _ratio(12.0, 1e-320) is None  # 12 / 1e-320 overflows to inf
    assert _ratio(12.0, 8.0) == 1.5


def test_the_json_summary_of_a_run_is_strict_json(tmp_path: Path) -> None:
    # rates so small that the GPU-hours lower bound is a denormal and the ratio overflows
    rows = ["ts,model,rate_rps"]
    for step in range(6):
        at = (START + timedelta(minutes=10 * step)).isoformat()
        rows += [f"{at},chat/large,1e-320", f"{at},chat/small,1e-320"]
    trace = tmp_path / "tiny.csv"
    trace.write_text("\n".join(rows) + "\n")
    models = write_models(tmp_path / "models.yaml", MODELS_YAML)
    code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(tmp_path / "T.csv"), "--json", *FAST)
    assert code == 0, out
    doc = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    ratio = doc["policies"]["predictive"]["gpu_hours_over_lower_bound"]
    assert ratio is None or ratio > 0
    with (tmp_path / "T.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 2 * 60
