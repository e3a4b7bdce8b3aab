"""``forecast run`` names where an unknown forecast method came from: the ``--method`` it was
given, or ``forecast.method`` and the config file or environment variable that set it (as
``demo`` and ``serve`` do), not a ``--method`` that was never passed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.forecast import app

CHOICES = "choose one of auto, hybrid, level, prophet, persistence, hour_mean, seasonal_naive"


def _run(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["run", "--no-store", "--state-dir", str(tmp_path / "s"),
                                      *args])
    return result.exit_code, " ".join(result.output.split())


def test_an_unknown_method_in_the_config_file_is_named_as_the_files_setting(
        tmp_path: Path) -> None:
    config = tmp_path / "fm.yaml"
    config.write_text("forecast:\n  method: prophett\n")
    code, output = _run(tmp_path, "-c", str(config))
    assert code == 2
    assert f"error: {config}: forecast.method: unknown forecast method 'prophett'; " \
           f"{CHOICES}" in output
    assert "--method" not in output


def test_an_unknown_method_from_the_environment_is_named_as_its_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_FORECAST__METHOD", "prophett")
    code, output = _run(tmp_path)
    assert code == 2
    assert ("error: environment variable HEADROOM_FORECAST__METHOD: forecast.method: unknown "
            "forecast method 'prophett'") in output


def test_an_unknown_method_option_is_still_the_options_error(tmp_path: Path) -> None:
    code, output = _run(tmp_path, "--method", "magic")
    assert code == 2
    assert f"error: --method 'magic': {CHOICES}" in output
