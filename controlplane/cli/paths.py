"""Output files of the CLI: never an input, never half-written."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from controlplane.files import write_atomically
from forecaster.errors import InputError

__all__ = ["check_output_path", "write_atomically"]


def check_output_path(out: Path, option: str, inputs: Mapping[str, Path]) -> None:
    """Refuse an output path that is one of the inputs (``inputs``: option name -> path) or
    whose directory cannot be created or written, before any work is done. Creates nothing: the
    write makes the missing directories, so a command refused later leaves none behind."""
    target = out.expanduser().resolve()
    for name, path in inputs.items():
        if path.expanduser().resolve() == target:
            raise InputError(f"{option} {out}: is the input file of {name}; it would be "
                             "overwritten; choose another path")
    if target.is_dir():
        raise InputError(f"{option} {out}: is a directory")
    parent = target.parent
    existing = _nearest_existing(parent)
    if not existing.is_dir():
        raise InputError(f"{option} {out}: a parent of it is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        if existing == parent:
            raise InputError(f"{option} {out}: the directory {parent} is not writable")
        raise InputError(f"{option} {out}: cannot create {parent}: the directory {existing} "
                         "is not writable")


def _nearest_existing(directory: Path) -> Path:
    """``directory`` or the nearest of its parents that exists; one that cannot be looked at
    (under a directory that cannot be searched) counts as missing."""
    for path in (directory, *directory.parents):
        with contextlib.suppress(OSError):
            if path.exists():
                return path
    return Path(directory.anchor)
