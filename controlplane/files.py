"""Files written whole or not at all: a temporary beside each, renamed over it when complete."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

Writer = Callable[[Path], object]


def write_atomically(path: Path, write: Writer) -> None:
    """``write`` a temporary file beside ``path``, then rename it over ``path``: a failed write
    (full disk, file size limit) leaves ``path`` as it was. A device or pipe (``/dev/null``,
    ``/dev/stdout``) is written directly: a rename would replace it by a file. Raises OSError."""
    write_all_atomically({path: write})


def write_all_atomically(writes: Mapping[Path, Writer]) -> None:
    """Write every file of ``writes`` to a temporary beside it and rename them only when all
    are written: a failed write leaves every path as it was. Raises OSError, naming the path
    of ``writes`` (its ``filename``) when the failure was its temporary's."""
    temps: dict[Path, Path] = {}
    try:
        for path, write in writes.items():
            if path.exists() and not path.is_file() and not path.is_dir():
                write(path)  # a device or pipe
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            temps[path] = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
            write(temps[path])
        for path, tmp in temps.items():
            tmp.replace(path)
    except BaseException as error:
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        named = _of_destination(error, temps) if isinstance(error, OSError) else None
        if named is not None:
            raise named from error
        raise


def _of_destination(error: OSError, temps: Mapping[Path, Path]) -> OSError | None:
    """``error`` naming the path written instead of its temporary (the user never gave the
    ``.x.csv.<pid>.<random>.tmp`` name), or None when it is not about a temporary."""
    for path, tmp in temps.items():
        if error.filename is not None and Path(error.filename) == tmp and error.errno:
            return OSError(error.errno, error.strerror, str(path))
    return None
