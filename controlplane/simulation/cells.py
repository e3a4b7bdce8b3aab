"""How a CSV cell is shown in an error message: as the user wrote it, never as a numpy repr."""

from __future__ import annotations

import math

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
