"""The root ``headroom --help`` lists each command with a one-line summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from controlplane.cli import app
from controlplane.models_file import load_model_specs


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
    assert names == ["simulate", "demo", "serve", "dashboard", "status", "db", "placement",
                     "forecast", "cost", "hint", "models", "fleet", "trace"]


def test_no_help_paragraph_keeps_the_source_line_breaks() -> None:
    for name, command in _commands(typer.main.get_group(app)).items():
        for paragraph in (command.help or "").split("\n\n"):
            assert "\n" not in paragraph.strip(), f"{name}: ragged help {paragraph[:60]!r}"


def test_a_long_help_paragraph_wraps_to_the_terminal_width() -> None:
    result = CliRunner().invoke(app, ["forecast", "run", "--help"], env={"COLUMNS": "100"},
                                terminal_width=100)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "a CSV with a repeated timestamp is refused (exit 2)" in text
    lines = [line.strip() for line in result.output.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("Bad input is reported"))
    # the paragraph (~530 characters) fills whole lines of a 100-column terminal: every line
    # but its last is full (a long word may move down: over 80 columns), none the short tail of
    # the docstring's source wrapping re-wrapped by Rich
    end = lines.index("", start)
    paragraph = lines[start:end]
    assert len(lines[start]) > 90
    assert all(len(line) > 80 for line in paragraph[:-1]), paragraph
    assert len(paragraph) == 6


def test_bracketed_option_help_is_printed_not_taken_for_rich_markup() -> None:
    # Rich reads "[default ...]" or "[series]" as a style tag and drops it from the help
    checked = set()
    for name, command in _commands(typer.main.get_group(app)).items():
        for param in command.params:
            text = (getattr(param, "help", None) or "").replace("\\[", "[")
            if "[" not in text:
                continue
            result = CliRunner().invoke(app, [*name.split(), "--help"],
                                        env={"COLUMNS": "400"}, terminal_width=400)
            assert result.exit_code == 0
            assert text in result.output, f"{name} {param.name}: {text!r} not in the help"
            checked.add(f"{name} {param.name}")
    assert {"demo db", "forecast backtest csv"} <= checked


def test_dashboard_help_names_where_the_port_and_address_default_from() -> None:
    result = CliRunner().invoke(app, ["dashboard", "--help"], env={"COLUMNS": "200"},
                                terminal_width=200)
    assert result.exit_code == 0
    assert "[default: dashboard.port, 8501]" in result.output
    assert "[default: dashboard.address, 127.0.0.1]" in result.output


def test_usage_lines_name_arguments_in_capitals_as_the_summaries_and_readme_do() -> None:
    # "Announce that MODEL will see ...": the usage line says {MODEL} too (Typer's braces mark
    # a required argument), not {model}, and a repeatable one is [WORKLOAD]..., not
    # [[WORKLOAD]...]...
    usages = {}
    for name, command in _commands(typer.main.get_group(app)).items():
        if not any(param.param_type_name == "argument" for param in command.params):
            continue
        result = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"},
                                    terminal_width=200)
        assert result.exit_code == 0
        usage = next(line for line in result.output.splitlines() if "Usage:" in line)
        usages[name] = usage.split("[OPTIONS]")[1].strip()
    assert usages["hint add"] == "{MODEL}"
    assert usages["hint remove"] == "{ID}"
    assert usages["models import"] == "{FILE}"
    assert usages["models remove"] == "{NAME}"
    assert usages["db upgrade"] == "[REVISION]"
    assert usages["db downgrade"] == "{REVISION}"
    assert usages["placement release"] == "[WORKLOAD]..."
    for name, arguments in usages.items():
        assert arguments == arguments.upper(), f"{name}: {arguments}"


def test_placement_release_says_its_node_option_releases_every_binding_there() -> None:
    result = CliRunner().invoke(app, ["placement", "release", "--help"],
                                env={"COLUMNS": "200"}, terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "release every binding on this node" in text
    assert "only the bindings on this node" not in text


def test_status_help_names_every_section_the_readme_says_status_shows() -> None:
    result = CliRunner().invoke(app, ["status", "--help"], env={"COLUMNS": "200"},
                                terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for section in ("the placement journal", "forecast accuracy over the last hour",
                    "profiles corrected online", "demand hints not ended"):
        assert section in text, section


def test_models_import_help_points_to_a_file_that_shows_the_format() -> None:
    result = CliRunner().invoke(app, ["models", "import", "--help"], env={"COLUMNS": "200"},
                                terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "`headroom models --help`" not in text  # which says nothing of the format
    assert "deploy/examples/models.yaml is one, commented" in text
    example = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml"
    assert load_model_specs(example)  # the file named is a models file


def test_hint_add_help_shows_the_accepted_rps_range_and_a_zoneless_start_as_utc() -> None:
    result = CliRunner().invoke(app, ["hint", "add", "--help"], env={"COLUMNS": "200"},
                                terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    # before: [x>=0.0], while above 1e7 was refused; then [0.0<=x<=...], while 0 floors nothing
    assert "requests/s the model will see at least [0.0<x<=10000000.0]" in text
    assert "start of the window (ISO-8601; UTC unless it names a zone) [default: now]" in text
