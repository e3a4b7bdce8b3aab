"""Every command taking ``--config`` refuses a bad settings file the same way: one line naming the
file, exit code 2, before it reads or writes anything."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env

COMMANDS = [["serve"], ["demo", "--minutes", "1", "--no-dashboard"], ["dashboard"], ["status"],
            ["forecast", "run"], ["cost", "export", "--out", "cost.csv"], ["db", "upgrade"],
            ["db", "downgrade", "base"], ["placement", "serve"], ["hint", "list"],
            ["placement", "bindings"], ["trace", "export", "--out", "trace.csv"],
            ["trace", "timeline", "--out", "timeline.csv"], ["trace", "replay", "--out-dir", "r"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("config", ["a directory", "an unknown key", "nesting 600 deep"])
def test_every_command_refuses_a_bad_config_with_the_same_line(
        tmp_path: Path, command: list[str], config: str) -> None:
    if config == "a directory":
        path, expected = tmp_path / "conf.d", "conf.d: a directory, not a config file"
        path.mkdir()
    elif config == "nesting 600 deep":  # before: a RecursionError traceback
        path = tmp_path / "headroom.yaml"
        expected = "headroom.yaml: line 1: nested deeper than 100 levels"
        path.write_text("db: " + "[" * 600 + "]" * 600 + "\n")
    else:
        path, expected = tmp_path / "headroom.yaml", "headroom.yaml: surprise: unknown key"
        path.write_text("surprise: 1\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    run = subprocess.run([*WARM_HEADROOM, *command, "--config", path.name], env=_env(),
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stderr) == (2, f"error: {expected}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no store, no log, no output


@pytest.mark.parametrize("command", [["serve"], ["demo", "--minutes", "1", "--no-dashboard"]],
                         ids=" ".join)
def test_a_budget_of_no_tenant_stops_serve_and_demo_before_the_state_dir_is_made(
        tmp_path: Path, command: list[str]) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db:\n  url: sqlite:///{tmp_path / 'store.db'}\n"
                      "autoscaling:\n  tenant_gpu_budgets: {serach: 4}\n")
    env = _env(HEADROOM_FORECAST__STATE_DIR=str(tmp_path / "state"))
    run = subprocess.run([*WARM_HEADROOM, *command, "--config", str(config)], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith("error: autoscaling.tenant_gpu_budgets: no model belongs to "
                                 "tenant(s) 'serach'")
    assert [p.name for p in tmp_path.iterdir()] == ["headroom.yaml"]  # no state dir, no store


def test_placement_serve_names_a_bad_config_even_when_its_port_is_taken(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run([*WARM_HEADROOM, "placement", "serve", "--listen", f"127.0.0.1:{port}",
                              "--config", "conf.d"], env=_env(), cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stderr) == (2, "error: conf.d: a directory, not a config file\n")
