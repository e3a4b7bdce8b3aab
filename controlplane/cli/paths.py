"""Output files of the CLI: never an input, never half-written."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from forecaster.errors import InputError


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


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """``write`` a temporary file beside ``path``, then rename it over ``path``: a failed write
    (full disk, file size limit) leaves ``path`` as it was. A device or pipe (``/dev/null``,
    ``/dev/stdout``) is written directly: a rename would replace it by a file. Raises OSError."""
    if path.exists() and not path.is_file() and not path.is_dir():
        write(path)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
