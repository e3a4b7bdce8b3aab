"""Every float option of headroom's commands refuses nan and infinities naming the option, the
same way (controlplane.cli.numbers), before the command does anything; a number out of range
names the range, and a number in range still goes through."""

from __future__ import annotations

import subprocess
import typing
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from clihelpers import WARM_HEADROOM, _env
from typer.testing import CliRunner

from controlplane.cli import app


def _commands(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield path, command
        return
    for name, sub in sorted(subcommands.items()):
        yield from _commands(sub, (*path, name))


def _float_options() -> list[tuple[tuple[str, ...], str]]:
    """(command path, option) of each option whose parameter is a float or ``float | None``."""
    found = []
    for path, command in _commands(typer.main.get_command(app), ()):
        callback = command.callback
        hints = typing.get_type_hints(getattr(callback, "__wrapped__", callback))
        for param in command.params:
            if hints.get(param.name) in (float, float | None):
                found.append((path, max(param.opts, key=len)))
    return found


FLOAT_OPTIONS = _float_options()


def test_the_float_options_are_found_in_every_command_that_has_them() -> None:
    assert {(" ".join(path), option) for path, option in FLOAT_OPTIONS} >= {
        ("demo", "--speed"), ("demo", "--minutes"), ("simulate", "--tick-s"),
        ("simulate", "--shortfall-cost-ratio"), ("simulate", "--hint-lead-s"),
        ("cost export", "--days"), ("cost export", "--step-s"), ("status", "--max-tick-age-s"),
        ("hint add", "--rps"), ("placement serve", "--grace-s"),
        ("forecast run", "--fit-budget-s"), ("forecast backtest", "--test-fraction")}


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize(("path", "option"), FLOAT_OPTIONS,
                         ids=[f"{' '.join(p)} {o}" for p, o in FLOAT_OPTIONS])
def test_a_float_option_given_nan_or_an_infinity_is_refused_naming_the_option(
        path: tuple[str, ...], option: str, value: str) -> None:
    result = CliRunner().invoke(app, [*path, option, value], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}': {value} is not a finite number" in result.output


def test_headroom_demo_speed_nan_says_nan_is_not_a_finite_number_in_the_speed_range() -> None:
    run = subprocess.run([*WARM_HEADROOM, "demo", "--speed", "nan", "--no-dashboard"],
                         env=_env(COLUMNS="300"), capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert ("Invalid value for '--speed': nan is not a finite number in the range "
            "0.1<=x<=10000.0") in run.stderr
    assert "less than or equal" not in run.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["demo", "--speed", "20000"], "'--speed': 20000.0 is not in the range 0.1<=x<=10000.0"),
    (["demo", "--minutes", "-1"], "'--minutes': -1.0 is not in the range x>=0.0"),
    (["cost", "export", "--out", "x.csv", "--days", "fast"], "'--days': 'fast' is not a number"),
    (["hint", "add", "m", "--end", "2099-01-01", "--rps", "0"],
     "'--rps': 0.0 is not in the range 0.0<x<=10000000.0"),
])
def test_a_float_option_out_of_its_range_or_not_a_number_is_refused_naming_both(
        args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert f"Invalid value for {message}" in result.output


def test_a_float_option_shows_its_range_in_the_help() -> None:
    result = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    assert "[0.1<=x<=10000.0]" in result.output
