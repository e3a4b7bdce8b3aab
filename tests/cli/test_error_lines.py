"""An ``error:`` or ``warning:`` line prints its message as written: square brackets in a path,
a pattern or a series name are text, not Rich markup to drop."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clihelpers import HEADROOM, _env


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HEADROOM, *args], env=_env(COLUMNS="400"), cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_settings_error_shows_the_field_pattern_with_its_brackets(tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("pools:\n  - name: A100\n    product: A100-80GB\n"
                      "    price_per_gpu_hour: 1\n", encoding="utf-8")
    result = _run("db", "upgrade", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert "pools.0.name: String should match pattern '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'" \
        in result.stderr


def test_a_usage_error_keeps_a_bracketed_directory_in_the_path(tmp_path: Path) -> None:
    (tmp_path / "[tenant-a]").mkdir()
    (tmp_path / "[tenant-a]" / "trace.csv").write_text("ts,model,rate_rps\n", encoding="utf-8")
    result = _run("simulate", "--trace", "[tenant-a]/trace.csv", "--models",
                  "[tenant-a]/models.yaml", "--timeline-out", "timeline.csv", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: [tenant-a]/models.yaml: no such models file"


def test_a_backtest_error_keeps_a_bracketed_directory_in_the_path(tmp_path: Path) -> None:
    (tmp_path / "[tenant-a]").mkdir()
    result = _run("forecast", "backtest", "--csv", "[tenant-a]/missing.csv", "--time-col", "ts",
                  "--value-col", "rate_rps", "--predictions-out", "p.csv", cwd=tmp_path)
    assert result.returncode == 2
    assert "error: [tenant-a]/missing.csv" in result.stderr
