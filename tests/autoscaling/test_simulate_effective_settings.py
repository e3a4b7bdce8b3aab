"""``headroom simulate``'s effective settings: per policy, every key ``--config`` sets, the value
the run used (read off the run's own objects), serve's default and where the value came from;
and the ``note:`` line naming simulate's defaults that are not serve's, pinned to ``--config``'s
help and the README."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_type_hints

from simulate_support import cli_app, write_models, write_trace
from typer.testing import CliRunner, Result

from controlplane.cli.simulate import simulate_command
from controlplane.settings_groups import SafetySettings
from controlplane.simulation.effective_settings import READERS
from controlplane.simulation.operator_settings import HONOURED

FAST = ["--forecast-method", "persistence"]
POLICIES = ["--policy", "predictive", "--policy", "reactive", "--policy", "static"]
README = Path(__file__).resolve().parents[2] / "README.md"


def _invoke(tmp_path: Path, *args: str) -> Result:
    trace = write_trace(tmp_path / "trace.csv", steps=6)
    models = write_models(tmp_path / "models.yaml")
    return CliRunner().invoke(cli_app(), ["--trace", str(trace), "--models", str(models),
                                          "--timeline-out", str(tmp_path / "t.csv"), *FAST,
                                          *args])


def _listed(text: str) -> str:
    """The keys a note or help lists, after "differ from serve's for", up to the next ':' or
    ';' that ends the list."""
    flat = " ".join(text.split())
    start = flat.index("differ from serve's for ") + len("differ from serve's for ")
    rest = flat[start:]
    return rest[:rest.index("): ") + 1] if "): " in rest else rest[:rest.index("); ") + 1]


def test_every_key_the_config_honours_is_read_for_some_policy() -> None:
    assert set(READERS) == HONOURED


def test_the_json_gives_each_policy_the_values_it_ran_with_and_serves_defaults(
        tmp_path: Path) -> None:
    result = _invoke(tmp_path, *POLICIES, "--json")
    assert result.exit_code == 0, result.output
    used = json.loads(result.stdout)["effective_settings"]
    assert set().union(*used.values()) == HONOURED
    step = used["predictive"]["safety.max_replica_step"]
    assert step == {"value": 200, "serve_default": SafetySettings().max_replica_step,
                    "from": "simulate_default"}
    assert used["reactive"]["safety.max_node_step"]["value"] == 10
    assert "safety.max_node_step" not in used["static"]  # static never scales down
    assert used["predictive"]["autoscaling.profile_correction"]["value"] == {"enabled": False}
    assert used["reactive"]["autoscaling.policy"]["from"] == "option"


def test_the_sources_name_the_config_and_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "serve.yaml").write_text("safety: {max_replica_step: 8}\n")
    result = _invoke(tmp_path, "--json", "--config", str(tmp_path / "serve.yaml"),
                     "--tick-s", "15")
    assert result.exit_code == 0, result.output
    used = json.loads(result.stdout)["effective_settings"]["predictive"]
    assert used["safety.max_replica_step"] == {"value": 8, "serve_default": 8, "from": "config"}
    assert used["reconcile.interval_s"]["value"] == 15
    assert used["reconcile.interval_s"]["from"] == "option"
    assert used["safety.max_node_step"]["from"] == "simulate_default"


def test_a_note_names_the_defaults_unlike_serves_that_no_config_set(tmp_path: Path) -> None:
    (tmp_path / "serve.yaml").write_text("safety: {max_replica_step: 8}\n")
    result = _invoke(tmp_path, "--config", str(tmp_path / "serve.yaml"))
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1, result.stderr
    assert "safety.max_node_step (16; serve 4)" in notes[0]
    assert "safety.max_replica_step" not in notes[0]  # the config set it


def test_the_help_and_readme_list_the_defaults_the_policies_really_use(tmp_path: Path) -> None:
    result = _invoke(tmp_path, *POLICIES)
    assert result.exit_code == 0, result.output
    note = next(line for line in result.stderr.splitlines() if line.startswith("note:"))
    listed = _listed(note)
    option = get_type_hints(simulate_command, include_extras=True)["config_file"]
    config_help = next(m.help for m in option.__metadata__ if getattr(m, "help", None))
    assert _listed(config_help) == listed
    assert listed in " ".join(README.read_text().split())
