"""Settings: YAML, environment and overrides merge; bad input is one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.settings import ConfigError, load_settings


def test_yaml_values_are_overridden_by_the_environment(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("reconcile:\n  interval_s: 45\nforecast:\n  horizon_s: 1800\n")
    monkeypatch.setenv("HEADROOM_RECONCILE__INTERVAL_S", "15")
    settings = load_settings(config)
    assert settings.reconcile.interval_s == 15
    assert settings.forecast.horizon_s == 1800


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("reconcile:\n  interval_s: -5\n", "reconcile.interval_s: Input should be greater than 0"),
    ("reconcile:\n  intervals: 5\n", "reconcile.intervals: unknown key"),
    ("surprise: true\n", "surprise: unknown key"),
    ("pools:\n  - {name: a, product: L4, price_per_gpu_hour: 1, min_nodes: 3, max_nodes: 1}\n",
     "pools.0: Value error, pool a: min_nodes > max_nodes"),
    ("forecast:\n  horizon_s: 30\n  step_s: 60\n", "forecast.horizon_s must be >= forecast.step_s"),
    ("reconcile: [1,\n", "line 2"),
    ("autoscaling:\n  calibration_window_s: 0\n",
     "autoscaling.calibration_window_s: Input should be greater than 0"),
    ("autoscaling:\n  calibration_window_s: 3600\n",
     "autoscaling.calibration_window_s (3600 s) holds 12 forecast refreshes (forecast.interval_s "
     "= 300 s); the upper tail is calibrated from 48 errors, so it must be >= 14400 s"),
    ("placement:\n  metrics_listen: '9464'\n",
     "placement.metrics_listen: Value error, '9464': expected HOST:PORT"),
    ("placement:\n  listen: '50051'\n",
     "placement.listen: Value error, '50051': expected HOST:PORT"),
    ("pools:\n  - {name: GPU_Pool, product: L4, price_per_gpu_hour: 1}\n",
     "pools.0.name: String should match pattern"),
    ("pools:\n  - {name: " + "a" * 50 + ", product: L4, price_per_gpu_hour: 1}\n",
     "pools.0.name: String should have at most 49 characters"),
], ids=["negative interval", "misspelt key", "unknown top-level key", "pool bounds",
        "cross-field horizon", "broken yaml", "calibration window zero",
        "calibration window too short to calibrate", "metrics address without a host",
        "placement address without a host",
        "pool name not a DNS label", "pool name too long for its placeholder"])
def test_bad_configuration_is_one_line_naming_the_field(tmp_path: Path, yaml_text: str,
                                                        expected: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    message = str(caught.value)
    assert expected in message and str(config) in message
    assert "\n" not in message


def test_a_missing_config_file_is_named() -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: no such config file"):
        load_settings(Path("/nonexistent/nope.yaml"))
