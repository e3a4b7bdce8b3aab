"""``headroom --help``, a group's help and ``--version`` start without the heavy libraries: each
command imports what it runs when it runs (``controlplane.cli``), so no command, and no test that
spawns the CLI, pays for every other command's imports."""

from __future__ import annotations

import json
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from clihelpers import HEADROOM, _env

#: what no help and no --version may import (each costs from tens of ms to a second)
HEAVY = ("pandas", "numpy", "pyarrow", "sqlalchemy", "sqlmodel", "alembic", "psycopg", "grpc",
         "google.protobuf", "prophet", "kubernetes", "streamlit", "apscheduler")

#: runs ``headroom ARGS`` in this process, then prints its exit code and the heavy modules it
#: imported, on the last line
_MAIN_THEN_HEAVY = f"""
import json, sys
from controlplane.cli import main
sys.argv = ["headroom", *sys.argv[1:]]
code = 0
try:
    main()
except SystemExit as done:
    code = done.code or 0
print(json.dumps([code, sorted({{h for h in {HEAVY!r} for name in sys.modules
                               if name == h or name.startswith(h + ".")}})]))
"""

#: renders the help of every command and group of the tree, then prints the heavy modules
_EVERY_HELP_THEN_HEAVY = f"""
import json, sys
import typer
from typer.testing import CliRunner
from controlplane.cli import app
root = typer.main.get_command(app)
paths = []
def walk(command, path):
    paths.append(path)
    for name in sorted(getattr(command, "commands", {{}})):
        walk(command.commands[name], [*path, name])
walk(root, [])
rendered = {{}}
for path in paths:
    result = CliRunner().invoke(app, [*path, "--help"], prog_name="headroom")
    rendered[" ".join(path)] = [result.exit_code, result.output]
print(json.dumps(rendered))
print(json.dumps(sorted({{h for h in {HEAVY!r} for name in sys.modules
                         if name == h or name.startswith(h + ".")}})))
"""

GROUPS = ("cost", "db", "forecast", "hint", "models", "placement")


def _headroom(*args: str, cwd: Path) -> tuple[int, str, list[str]]:
    """Exit code, output and the heavy modules imported of ``headroom ARGS``."""
    run = subprocess.run([HEADROOM[0], "-c", _MAIN_THEN_HEAVY, *args], env=_env(COLUMNS="100"),
                         cwd=cwd, capture_output=True, text=True, timeout=120, check=True)
    *output, last = run.stdout.splitlines()
    code, heavy = json.loads(last)
    return code, "\n".join(output), heavy


def test_the_root_help_imports_none_of_the_heavy_libraries(tmp_path: Path) -> None:
    code, output, heavy = _headroom("--help", cwd=tmp_path)
    assert code == 0
    assert "Usage:" in output and "simulate" in output and "placement" in output
    assert heavy == []


@pytest.mark.parametrize("group", GROUPS)
def test_a_groups_help_imports_none_of_the_heavy_libraries(group: str, tmp_path: Path) -> None:
    code, output, heavy = _headroom(group, "--help", cwd=tmp_path)
    assert code == 0
    assert "Usage:" in output and "Commands" in output
    assert heavy == []


def test_every_command_and_group_renders_its_help_without_the_heavy_libraries(
        tmp_path: Path) -> None:
    run = subprocess.run([HEADROOM[0], "-c", _EVERY_HELP_THEN_HEAVY], env=_env(COLUMNS="100"),
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True)
    rendered_line, heavy_line = run.stdout.splitlines()[-2:]
    rendered = json.loads(rendered_line)
    assert {"", "simulate", "demo", "serve", "dashboard", "status", "db upgrade",
            "db downgrade", "placement serve", "forecast run", "forecast backtest",
            "cost export", "hint add", "models import", "models pause"} <= set(rendered)
    for path, (exit_code, output) in rendered.items():
        assert exit_code == 0, f"headroom {path} --help: exit {exit_code}: {output}"
        assert f"Usage: headroom {path}".rstrip() in output, f"headroom {path} --help: {output}"
    assert json.loads(heavy_line) == []


def test_version_prints_the_installed_distributions_version_cheaply(tmp_path: Path) -> None:
    code, output, heavy = _headroom("--version", cwd=tmp_path)
    assert code == 0
    assert output == f"headroom {metadata.version('headroom')}"
    assert heavy == []
