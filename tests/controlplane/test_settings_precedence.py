"""Settings precedence (overrides > environment > file > defaults): a higher source's value of a
setting replaces the lower one's, a mapping included; only groups combine field by field."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.settings import load_settings
from controlplane.settings_precedence import env_keyed_only


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("HEADROOM_AUTOSCALING", "HEADROOM_SIM", "HEADROOM_DB__URL"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "headroom.yaml"
    path.write_text("autoscaling:\n  tenant_gpu_budgets:\n    acme: 16\n"
                    "sim:\n  true_throughput_factor:\n    m1: 0.5\n"
                    "db:\n  retention_s: 0\n")
    return path


def test_an_empty_mapping_in_the_environment_clears_the_files_mapping(
        config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS", "{}")
    monkeypatch.setenv("HEADROOM_SIM__TRUE_THROUGHPUT_FACTOR", "{}")
    settings = load_settings(config)
    assert settings.autoscaling.tenant_gpu_budgets == {}
    assert settings.sim.true_throughput_factor == {}


def test_a_mapping_in_the_environment_replaces_the_files_instead_of_adding_to_it(
        config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS", '{"globex": 8}')
    assert load_settings(config).autoscaling.tenant_gpu_budgets == {"globex": 8.0}


def test_a_mapping_inside_a_group_given_as_json_replaces_the_files(
        config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_AUTOSCALING", '{"tenant_gpu_budgets": {"globex": 8}}')
    assert load_settings(config).autoscaling.tenant_gpu_budgets == {"globex": 8.0}


def test_a_variable_of_a_groups_field_keeps_the_files_other_fields_of_the_group(
        config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_AUTOSCALING__CALIBRATION_WINDOW_S", "90000")
    settings = load_settings(config)
    assert settings.autoscaling.calibration_window_s == 90000
    assert settings.autoscaling.tenant_gpu_budgets == {"acme": 16.0}


def test_variables_naming_keys_of_a_mapping_set_those_keys_and_keep_the_files_others(
        config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS__GLOBEX", "8")
    assert load_settings(config).autoscaling.tenant_gpu_budgets == {"acme": 16.0, "globex": 8.0}


def test_an_override_of_a_groups_field_keeps_the_files_other_fields_of_the_group(
        config: Path) -> None:
    settings = load_settings(config, db={"url": "sqlite:///given.db"})  # demo --db
    assert (settings.db.url, settings.db.retention_s) == ("sqlite:///given.db", 0)


def test_a_mapping_given_as_an_override_replaces_the_environments(
        config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS", '{"globex": 8}')
    settings = load_settings(config, autoscaling={"tenant_gpu_budgets": {}})
    assert settings.autoscaling.tenant_gpu_budgets == {}


@pytest.mark.parametrize(("environ", "keyed_only"), [
    ({"HEADROOM_A__B__K": "1"}, True),
    ({"HEADROOM_A__B": "{}", "HEADROOM_A__B__K": "1"}, False),
    ({"HEADROOM_A": '{"b": {}}', "HEADROOM_A__B__K": "1"}, False),
    ({"HEADROOM_A": '{"c": 1}', "HEADROOM_A__B__K": "1"}, True),
], ids=["only a key's variable", "the mapping's own variable", "a group's JSON holding it",
        "a group's JSON without it"])
def test_a_mapping_counts_as_given_key_by_key_only_when_nothing_gave_it_whole(
        environ: dict[str, str], keyed_only: bool) -> None:
    assert env_keyed_only(("a", "b"), environ) is keyed_only
