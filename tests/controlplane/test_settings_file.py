"""The settings file as an operator writes it: YAML's own forms are read as YAML reads them, and
a mistake in one is one line naming the key at fault."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controlplane.settings import ConfigError, load_settings


def _refusal(tmp_path: Path, yaml_text: str) -> str:
    config = tmp_path / "headroom.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    return str(caught.value)


@pytest.mark.parametrize(("yaml_text", "key"), [
    ("1: 2\n", "'1' is read as int"), ("~: {}\n", "'~' is read as null"),
    ("yes: 2\n", "'yes' is read as bool")],
    ids=["a number", "a null", "a YAML boolean"])
def test_a_top_level_key_that_is_not_a_name_is_one_line_naming_it(
        tmp_path: Path, yaml_text: str, key: str) -> None:
    assert _refusal(tmp_path, yaml_text) == (
        f"{tmp_path / 'headroom.yaml'}: line 1: key {key}, not a name of settings (db:, "
        "reconcile:, ...)")


def test_a_merge_key_in_the_config_file_is_read_as_yaml_reads_it(tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("pools:\n"
                      "  - &l4 {name: l4, product: L4, price_per_gpu_hour: 0.8, max_nodes: 3}\n"
                      "  - <<: *l4\n    name: a100\n    product: A100-80GB\n"
                      "    price_per_gpu_hour: 5.12\n")
    pools = load_settings(config).pools
    assert [(p.name, p.product, p.max_nodes) for p in pools] == [
        ("l4", "L4", 3), ("a100", "A100-80GB", 3)]


def test_a_key_given_twice_beside_a_merge_key_is_still_refused_naming_its_line(
        tmp_path: Path) -> None:
    message = _refusal(tmp_path, "pools:\n  - &l4 {name: l4, product: L4, price_per_gpu_hour: 1}\n"
                                 "  - <<: *l4\n    name: a\n    name: b\n")
    assert message == f"{tmp_path / 'headroom.yaml'}: line 5: duplicate key 'name'"


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("reconcile:\n  intervl_s: 10\n",
     "reconcile.intervl_s: unknown key; did you mean reconcile.interval_s?"),
    ("reconcil:\n  interval_s: 10\n", "reconcil: unknown key; did you mean reconcile?"),
    ("pools:\n  - {name: a, product: L4, price_per_gpu_hour: 1, gpus_per_nod: 4}\n",
     "pools.0.gpus_per_nod: unknown key; did you mean pools.0.gpus_per_node?"),
    ("autoscaling:\n  profile_correction:\n    windw_s: 60\n",
     "autoscaling.profile_correction.windw_s: unknown key; did you mean "
     "autoscaling.profile_correction.window_s?"),
    ("surprise: true\n", "surprise: unknown key"),
], ids=["nested", "top level", "in a pool", "two levels down", "nothing close"])
def test_an_unknown_key_is_refused_with_its_path_and_the_close_match(
        tmp_path: Path, yaml_text: str, expected: str) -> None:
    assert _refusal(tmp_path, yaml_text) == f"{tmp_path / 'headroom.yaml'}: {expected}"


def test_a_nodepool_name_for_no_configured_pool_is_refused_naming_it(tmp_path: Path) -> None:
    message = _refusal(tmp_path, "k8s:\n  nodepool_names: {l4: gpu-l4, a100-80g: gpu-a100}\n")
    assert message.startswith(str(tmp_path / "headroom.yaml"))
    assert message.endswith("k8s.nodepool_names: no pool is named 'a100-80g'; the pools are "
                            "a100-80gb, h100-80gb, l4")


def test_a_utf8_config_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("# réglages du nœud\nk8s:\n  identity: nœud-1\n", encoding="utf-8")
    ascii_locale = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0",
                    "PYTHONUTF8": "0", "PYTHONIOENCODING": "utf-8"}
    read = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; from controlplane.settings "
         "import load_settings; print(load_settings(Path(sys.argv[1])).k8s.identity)",
         str(config)], env=ascii_locale, capture_output=True, text=True, encoding="utf-8",
        timeout=60)
    assert (read.returncode, read.stdout, read.stderr) == (0, "nœud-1\n", "")


def test_a_forecast_horizon_past_a_week_is_refused_naming_it(tmp_path: Path) -> None:
    # at 10**20 s every refresh failed, persistence too (MemoryError): no forecast, no error
    assert load_settings(None, forecast={"horizon_s": 7 * 86400}).forecast.horizon_s == 604800
    message = _refusal(tmp_path, "forecast:\n  horizon_s: 100000000000000000000\n")
    assert message == (f"{tmp_path / 'headroom.yaml'}: forecast.horizon_s: Input should be less "
                       "than or equal to 604800, got 100000000000000000000")


def test_a_config_file_that_is_not_utf8_is_one_line_naming_the_line(tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_bytes("reconcile:\n  interval_s: 10  # réglé\n".encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert str(caught.value) == (f"{config}: line 2: not UTF-8 (byte 0xe9); save the file as "
                                 "UTF-8")
