"""Files written whole or not at all (controlplane.files)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from controlplane.files import write_all_atomically


def _write_text(path: Path, *, text: str) -> None:
    path.write_text(text)


def _disk_full(path: Path) -> None:
    path.write_text("half")
    raise OSError(28, "No space left on device")


def test_a_failed_write_of_one_file_leaves_every_file_as_it_was(tmp_path: Path) -> None:
    first, second = tmp_path / "predictive.csv", tmp_path / "out" / "reactive.csv"
    first.write_text("old\n")
    with pytest.raises(OSError, match="No space left"):
        write_all_atomically({first: lambda tmp: tmp.write_text("new\n"), second: _disk_full})
    assert first.read_text() == "old\n"
    assert not second.exists()
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["predictive.csv"]


def test_every_file_is_in_place_once_all_are_written(tmp_path: Path) -> None:
    paths = [tmp_path / "a.csv", tmp_path / "sub" / "b.csv"]
    write_all_atomically({p: partial(_write_text, text=p.name) for p in paths})
    assert [p.read_text() for p in paths] == ["a.csv", "b.csv"]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["a.csv", "b.csv"]
