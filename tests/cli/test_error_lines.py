"""An ``error:`` or ``warning:`` line prints its message as written: square brackets in a path,
a pattern or a series name are text, not Rich markup to drop."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env

from controlplane import cli


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, *args], env=_env(COLUMNS="400"), cwd=cwd,
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
    assert result.stderr.strip().splitlines() == [  # both inputs' problems, in one run
        "error: [tenant-a]/trace.csv: no rows",
        "error: [tenant-a]/models.yaml: no such models file"]


def test_a_backtest_error_keeps_a_bracketed_directory_in_the_path(tmp_path: Path) -> None:
    (tmp_path / "[tenant-a]").mkdir()
    result = _run("forecast", "backtest", "--csv", "[tenant-a]/missing.csv", "--time-col", "ts",
                  "--value-col", "rate_rps", "--predictions-out", "p.csv", cwd=tmp_path)
    assert result.returncode == 2
    assert "error: [tenant-a]/missing.csv" in result.stderr


def test_a_file_name_too_long_for_the_file_system_is_one_line_naming_it_cut_short(
        tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text("ts,model,rate_rps\n2025-01-01 00:00:00,m,1\n",
                                        encoding="utf-8")
    (tmp_path / "models.yaml").write_text(
        "models:\n  - {name: m, gpu_product: A100-80GB, per_replica_rps: 2.0, "
        "gpu_per_replica: 1.0, isolation: STRICT, tenant: acme,\n"
        "     cold_start: {p50_s: 22, p90_s: 39}}\n", encoding="utf-8")
    long_name = "t" * 300 + ".csv"
    status = _run("status", "--config", long_name, cwd=tmp_path)
    assert status.returncode == 2
    assert status.stderr == f"error: {'t' * 60}…: File name too long\n"
    simulate = _run("simulate", "--trace", "trace.csv", "--models", "models.yaml",
                    "--timeline-out", long_name, cwd=tmp_path)
    assert simulate.returncode == 2  # the path is shown resolved: its first 60 characters
    assert simulate.stderr.startswith(f"error: {str(tmp_path.resolve())[:60]}")
    assert simulate.stderr.endswith("…: File name too long\n")
    assert simulate.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models.yaml", "trace.csv"]


def test_an_os_error_about_no_file_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(cli, "app", broken)
    with pytest.raises(OSError, match="Input/output error"):
        cli.main()
