"""``headroom simulate``'s input as the user wrote it: errors name the file's own lines (blank
lines counted), a trace out of order or with ``--time-unit`` for timestamps replays with a
warning, both missing input files are named in one run, and a timeline that cannot be written
is refused before anything is simulated, naming the path given and the system's reason."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from simulate_support import cli_app, write_models, write_trace
from typer.testing import CliRunner, Result

FAST = ["--forecast-method", "persistence"]


def _run(trace: Path, models: Path, out: Path, *extra: str) -> Result:
    return CliRunner().invoke(cli_app(), ["--trace", str(trace), "--models", str(models),
                                          "--timeline-out", str(out), *FAST, *extra])


def _errors(result: Result) -> list[str]:
    """The ``error:`` lines of a refusal (exit 2, no traceback), whitespace collapsed."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return [" ".join(line.split()) for line in result.output.strip().splitlines()]


def _with_blank_lines(path: Path, after_line: int, count: int) -> list[str]:
    """The lines of ``path`` with ``count`` blank lines after its line ``after_line``."""
    lines = path.read_text().splitlines()
    return [*lines[:after_line], *[""] * count, *lines[after_line:]]


@pytest.mark.parametrize(("line", "cells", "message"), [
    (33, "garbage-ts,chat/small,5", "line 33: column 'ts': 'garbage-ts' is not a timestamp"),
    (33, "2025-01-01 02:40:00,chat/small,", "line 33: model 'chat/small': rate_rps must be a "
     "finite number >= 0, got an empty cell (or NaN)"),
    (42, ",,", "line 42: column 'model' is empty"),
], ids=["a bad timestamp", "an empty rate", "a row of empty cells at the end"])
def test_an_error_names_the_files_own_line_when_the_trace_has_blank_lines(
        tmp_path: Path, line: int, cells: str, message: str) -> None:
    """pandas skips blank lines: before, the rows under two of them were named two lines early
    (``line 31`` for a row on line 33)."""
    trace = write_trace(tmp_path / "trace.csv", steps=18)  # 37 lines
    lines = _with_blank_lines(trace, 11, 2)
    if line <= len(lines):
        lines[line - 1] = cells
    else:  # after two more blank lines at the end
        lines += ["", "", cells]
    trace.write_text("\n".join(lines) + "\n")
    assert trace.read_text().splitlines()[line - 1] == cells
    errors = _errors(_run(trace, write_models(tmp_path / "models.yaml"), tmp_path / "T.csv"))
    assert errors == [f"error: {trace}: {message}"]
    assert not (tmp_path / "T.csv").exists()


def test_a_trace_out_of_order_replays_as_sorted_with_a_warning_per_model(
        tmp_path: Path) -> None:
    models = write_models(tmp_path / "models.yaml")
    ordered = write_trace(tmp_path / "ordered.csv", steps=6)
    lines = ordered.read_text().splitlines()
    shuffled = tmp_path / "shuffled.csv"  # steps 1 and 0 of both models swapped
    shuffled.write_text("\n".join([lines[0], *lines[3:5], *lines[1:3], *lines[5:]]) + "\n")
    before = _run(ordered, models, tmp_path / "A.csv", "--json")
    after = _run(shuffled, models, tmp_path / "B.csv", "--json")
    assert (before.exit_code, after.exit_code) == (0, 0), after.output
    warnings = [" ".join(line.split()) for line in after.stderr.splitlines()
                if line.startswith("warning:")]
    assert warnings == [f"warning: {shuffled}: model '{model}': timestamps were out of order "
                        "(sorted)" for model in ("chat/large", "chat/small")]
    assert "out of order" not in before.stderr
    assert (tmp_path / "A.csv").read_text() == (tmp_path / "B.csv").read_text()
    assert json.loads(after.stdout)["policies"] == json.loads(before.stdout)["policies"]


def test_a_time_unit_for_a_column_of_timestamps_is_ignored_with_a_warning(
        tmp_path: Path) -> None:
    """As ``forecast`` ignores it; before, every timestamp was refused as not a number of s."""
    models = write_models(tmp_path / "models.yaml")
    trace = write_trace(tmp_path / "trace.csv", steps=6)
    plain = _run(trace, models, tmp_path / "A.csv", "--json")
    unit = _run(trace, models, tmp_path / "B.csv", "--json", "--time-unit", "s")
    assert (plain.exit_code, unit.exit_code) == (0, 0), unit.output
    assert (f"warning: {trace}: column 'ts' holds timestamps, not numbers: --time-unit s is "
            "ignored") in " ".join(unit.stderr.split())
    assert (tmp_path / "A.csv").read_text() == (tmp_path / "B.csv").read_text()


def test_a_missing_trace_and_a_missing_models_file_are_named_in_one_run(
        tmp_path: Path) -> None:
    trace, models = tmp_path / "nope.csv", tmp_path / "nope.yaml"
    assert _errors(_run(trace, models, tmp_path / "T.csv")) == [
        f"error: {trace}: no such trace file", f"error: {models}: no such models file"]


def test_a_bad_trace_is_named_beside_the_models_files_problems(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace.csv", steps=6, tweak={("chat/large", 2): "-4"})
    models = write_models(tmp_path / "models.yaml", "models: []\n")
    errors = _errors(_run(trace, models, tmp_path / "T.csv"))
    assert len(errors) == 2, errors
    assert errors[0] == (f"error: {trace}: line 6: model 'chat/large': rate_rps must be a "
                         "finite number >= 0, got -4.0")
    assert errors[1].startswith(f"error: {models}: ")


@pytest.mark.parametrize(("out", "message"), [
    ("/proc/x.csv", "--timeline-out /proc/x.csv: cannot write in the directory /proc: "),
    ("/proc/sub/x.csv", "--timeline-out /proc/sub/x.csv: cannot create /proc/sub: cannot write "
     "in the directory /proc: "),
], ids=["in /proc", "in a directory to create under /proc"])
def test_a_timeline_that_cannot_be_written_is_refused_before_the_simulation_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str, message: str) -> None:
    """Permissions pass /proc for root; the run simulated for minutes and then failed on
    ``/proc/.x.csv.<pid>.<random>.tmp``."""
    def no_work(*_: object, **__: object) -> None:
        raise AssertionError("the simulation ran")

    monkeypatch.setattr("controlplane.simulation.runner.simulate", no_work)
    trace = write_trace(tmp_path / "trace.csv", steps=6)
    errors = _errors(_run(trace, write_models(tmp_path / "models.yaml"), Path(out)))
    assert len(errors) == 1 and errors[0].startswith(f"error: {message}"), errors
    reason = errors[0].removeprefix(f"error: {message}")
    assert reason in (os.strerror(errno.ENOENT), os.strerror(errno.EACCES))
    assert ".tmp" not in errors[0]


def test_a_timeline_write_that_fails_names_the_timeline_not_its_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def cannot_open(path: Path, **_: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr("controlplane.simulation.runner.write_timeline", cannot_open)
    trace = write_trace(tmp_path / "trace.csv", steps=6)
    out = tmp_path / "T.csv"
    errors = _errors(_run(trace, write_models(tmp_path / "models.yaml"), out, "--policy",
                          "static"))
    assert errors == [f"error: {out}: {os.strerror(errno.EROFS)}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models.yaml", "trace.csv"]
