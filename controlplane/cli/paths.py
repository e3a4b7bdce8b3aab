"""Output files of the CLI: never an input, never half-written."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from controlplane.files import write_atomically
from forecaster.errors import InputError

__all__ = ["check_output_path", "write_atomically"]


def check_output_path(out: Path, option: str, inputs: Mapping[str, Path]) -> None:
    """Refuse an output path that is one of the inputs (``inputs``: option name -> path) or
    whose directory cannot be created or written, before any work is done."""
    target = out.expanduser().resolve()
    for name, path in inputs.items():
        if path.expanduser().resolve() == target:
            raise InputError(f"{option} {out}: is the input file of {name}; it would be "
                             "overwritten; choose another path")
    if target.is_dir():
        raise InputError(f"{option} {out}: is a directory")
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InputError(f"{option} {out}: a parent of it is a file, not a directory") from None
    except OSError as exc:
        raise InputError(f"{option} {out}: cannot create {parent}: {exc.strerror}") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {out}: the directory {parent} is not writable")
