"""The root ``headroom --help`` lists each command with a one-line summary."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from controlplane.cli import app


def _commands(group: TyperGroup, prefix: str = "") -> dict[str, Any]:
    ctx = typer.Context(group)
    found: dict[str, Any] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        found[prefix + name] = command
        if isinstance(command, TyperGroup):
            found.update(_commands(command, f"{prefix}{name} "))
    return found


def test_every_command_has_a_summary_of_one_line() -> None:
    commands = _commands(typer.main.get_group(app))
    assert {"simulate", "demo", "serve", "forecast backtest", "placement serve"} <= set(commands)
    for name, command in commands.items():
        summary = (command.short_help or command.help or "").split("\n\n")[0]
        assert summary.strip(), f"{name} has no help"
        assert "\n" not in summary.strip(), f"{name}: the summary spans lines: {summary!r}"


def test_root_help_shows_each_command_on_one_line_of_a_wide_terminal() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}, terminal_width=200)
    assert result.exit_code == 0
    panel = result.output.split("Commands")[1]
    rows = [line.strip("│ ").rstrip() for line in panel.splitlines() if line.startswith("│")]
    names = [row.split()[0] for row in rows]
    assert names == ["simulate", "demo", "serve", "dashboard", "db", "placement", "forecast",
                     "cost"]
