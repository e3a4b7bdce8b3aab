"""``headroom simulate`` says how many forecasts fell back and how many were issued before the
upper tail was calibrated: a new model's first hours are sized from the short-history tail."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from simulate_support import ONE_MODEL_YAML, START, cli_app, write_models
from typer.testing import CliRunner, Result

from controlplane.autoscaling.calibration import MIN_ERRORS


def _flat(tmp_path: Path, *args: str) -> Result:
    """chat/large at a flat 20 rps for 80 minutes, forecasts refreshed every minute."""
    lines = ["ts,model,rate_rps"] + [
        f"{(START + timedelta(minutes=m)).strftime('%Y-%m-%d %H:%M:%S')},chat/large,20"
        for m in range(80)]
    (tmp_path / "flat.csv").write_text("\n".join(lines) + "\n")
    models = write_models(tmp_path / "models.yaml", ONE_MODEL_YAML)
    return CliRunner().invoke(cli_app(), [
        "--trace", str(tmp_path / "flat.csv"), "--models", str(models), "--timeline-out",
        str(tmp_path / "t.csv"), "--forecast-interval-s", "60", *args])


def test_the_json_counts_fallbacks_and_the_forecasts_issued_before_calibration(
        tmp_path: Path) -> None:
    result = _flat(tmp_path, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["policies"]["predictive"]
    assert summary["forecast_fallbacks"]["short_history"] > 0
    assert sum(summary["forecast_fallbacks"].values()) <= summary["forecasts"]
    # an error is scored per forecast a minute later (once the volatility is measured): at
    # least the first MIN_ERRORS forecasts go uncalibrated, and the later ones are calibrated
    assert MIN_ERRORS <= summary["uncalibrated_forecasts"] < summary["forecasts"]


def test_the_text_summary_says_them_in_one_line(tmp_path: Path) -> None:
    result = _flat(tmp_path)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if "fell back" in line]
    assert len(lines) == 1, result.stdout
    assert "short_history" in lines[0]
    assert "before the upper tail was calibrated" in lines[0]
