"""How a CSV cell is shown in an error message: as the user wrote it, never as a numpy repr;
and the file line it is on."""

from __future__ import annotations

import contextlib
import csv
import math
from pathlib import Path

import numpy as np


def shown(value: object) -> str:
    """``-1.0`` not ``np.float64(-1.0)``; a text cell quoted; an empty (NaN) cell named."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "an empty cell (or NaN)"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def file_line(path: Path, row: int) -> int:
    """The line of ``path`` where data row ``row`` (0-based, as pandas counts the rows under the
    header) starts. pandas skips blank (and whitespace-only) lines, so ``row + 2`` is the line
    only in a file without them; this counts them, and a quoted cell spanning lines, as the file
    has them. Read only when an error names a line: a good trace is never read twice."""
    records = 0  # the header is record 0
    with contextlib.suppress(OSError, UnicodeDecodeError, csv.Error), \
            path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        start = 1
        for record in reader:
            if record and not (len(record) == 1 and not record[0].strip()):
                if records == row + 1:
                    return start
                records += 1
            start = reader.line_num + 1
    return row + 2
