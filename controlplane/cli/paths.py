"""Output files of the CLI: never an input, never half-written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from controlplane.files import write_atomically
from forecaster.errors import InputError

__all__ = ["check_output_path", "store_files", "write_atomically"]


def check_output_path(out: Path, option: str, inputs: Mapping[str, Path]) -> None:
    """Refuse an output path that is one of the inputs (``inputs``: option name -> path) or
    whose directory cannot be created or written, before any work is done. Its directory (or,
    when that is missing, the nearest parent that exists, where the write would create it) is
    tried by creating and removing a temporary file there, as the write's own temporary will
    be: permissions do not tell a read-only file system or ``/proc`` (which root may "write")
    from a writable one. Leaves nothing behind: the write makes the missing directories, so a
    command refused later leaves none. A device or pipe (``/dev/null``) is written directly
    (``write_atomically``) and only needs to be writable itself."""
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
    if target.exists() and not target.is_file():  # a device or pipe, written directly
        if not os.access(target, os.W_OK):
            raise InputError(f"{option} {out}: not writable")
        return
    why = _unwritable(existing, target.name)
    if why is not None:
        if existing == parent:
            raise InputError(f"{option} {out}: cannot write in the directory {parent}: {why}")
        raise InputError(f"{option} {out}: cannot create {parent}: cannot write in the "
                         f"directory {existing}: {why}")


def _unwritable(directory: Path, name: str) -> str | None:
    """Why a file cannot be created in ``directory`` (the OS's reason), or None when it can:
    a temporary named like the write's own (``.<name>.*.tmp``) is created and removed."""
    try:
        fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    except OSError as error:
        return error.strerror or str(error)
    os.close(fd)
    with contextlib.suppress(OSError):
        Path(temp).unlink()
    return None


def _nearest_existing(directory: Path) -> Path:
    """``directory`` or the nearest of its parents that exists; one that cannot be looked at
    (under a directory that cannot be searched) counts as missing."""
    for path in (directory, *directory.parents):
        with contextlib.suppress(OSError):
            if path.exists():
                return path
    return Path(directory.anchor)


def store_files(url: str) -> dict[str, Path]:
    """A SQLite store's file and its journal files, by what they are (none for a server): the
    inputs an ``--out`` must not be."""
    from controlplane.store.engine import sqlite_file

    store_file = sqlite_file(url)
    if store_file is None:
        return {}
    return {"the store (db.url)": store_file,
            **{f"the store's {suffix} file (db.url)": store_file.with_name(store_file.name + suffix)
               for suffix in ("-wal", "-shm", "-journal")}}
