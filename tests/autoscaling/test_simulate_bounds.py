"""``headroom simulate`` takes the models file's ``min_replicas`` / ``max_replicas`` through the
same core as the live loop: the falling trace's peak (20 replicas) is held to the max, its trough
(2) raised to the min; bounds out of order are refused naming the field."""

from __future__ import annotations

import csv
from datetime import timedelta
from pathlib import Path

from simulate_support import ONE_MODEL_YAML, START, cli_app, write_models
from typer.testing import CliRunner, Result

BOUNDED = ONE_MODEL_YAML.replace("    tenant: acme\n",
                                 "    tenant: acme\n    min_replicas: 5\n    max_replicas: 12\n")


def _simulate(tmp_path: Path, models_yaml: str) -> tuple[Result, list[int]]:
    """chat/large at 40 rps (20 replicas) for 30 minutes, then 4 rps (2) for 90 minutes: the
    run's result and the timeline's ready replicas per minute."""
    lines = ["ts,model,rate_rps"]
    for step in range(12):
        at = (START + timedelta(minutes=10 * step)).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{at},chat/large,{40.0 if step < 3 else 4.0}")
    trace = tmp_path / "falling.csv"
    trace.write_text("\n".join(lines) + "\n")
    models = write_models(tmp_path / "models.yaml", models_yaml)
    out = tmp_path / "timeline.csv"
    result = CliRunner().invoke(cli_app(), [
        "--trace", str(trace), "--models", str(models), "--timeline-out", str(out),
        "--policy", "reactive", "--forecast-method", "persistence"])
    if result.exit_code != 0:
        return result, []
    with out.open() as handle:
        return result, [int(r["ready_replicas"]) for r in csv.DictReader(handle)]


def test_simulated_replicas_stay_within_the_models_files_bounds(tmp_path: Path) -> None:
    result, unbounded = _simulate(tmp_path, ONE_MODEL_YAML)
    assert result.exit_code == 0, result.output
    assert max(unbounded) > 12 and min(unbounded[60:]) < 5  # the trace's own peak and trough
    result, bounded = _simulate(tmp_path, BOUNDED)
    assert result.exit_code == 0, result.output
    assert max(bounded) == 12
    assert min(bounded[60:]) == 5


def test_a_max_below_the_min_is_refused_naming_the_field(tmp_path: Path) -> None:
    result, _ = _simulate(tmp_path, BOUNDED.replace("max_replicas: 12", "max_replicas: 3"))
    assert result.exit_code == 2
    assert "max_replicas: 3 is below min_replicas 5" in result.output
