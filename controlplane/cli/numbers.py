"""The CLI's float options (``float_option``): a value is a finite number within the option's
range, or the option is refused naming it. Typer's own check of ``min``/``max`` reads ``nan`` as
out of range (``Invalid value for '--speed': Input should be less than or equal to 10000``) and
lets ``inf``, or ``nan`` where there is no bound, through to the command; no float option of
headroom's has a use for either."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import typer


def describe_range(low: float | None, high: float | None) -> str:
    """``0.1<=x<=10000.0``, ``x>=0.0`` or ``x<=5.0`` (click's spelling, as the help shows it);
    "" when unbounded."""
    if low is not None and high is not None:
        return f"{float(low)}<=x<={float(high)}"
    if low is not None:
        return f"x>={float(low)}"
    return f"x<={float(high)}" if high is not None else ""


def finite_float(low: float | None = None,
                 high: float | None = None) -> Callable[[object], float]:
    """The parser of a float option: its text (or its default) -> the number. Raises
    BadParameter, which click prints naming the option, for no number, nan or an infinity, or a
    number outside [low, high]."""
    bounds = describe_range(low, high)

    def parse(value: object) -> float:
        try:
            number = float(str(value))  # the option's text, or its default
        except ValueError:
            raise typer.BadParameter(f"{value!r} is not a number") from None
        if not math.isfinite(number):
            where = f" in the range {bounds}" if bounds else ""
            raise typer.BadParameter(f"{value} is not a finite number{where}")
        if (low is not None and number < low) or (high is not None and number > high):
            raise typer.BadParameter(f"{number} is not in the range {bounds}")
        return number

    return parse


def float_option(*declarations: Any, min: float | None = None, max: float | None = None,
                 **options: Any) -> Any:
    """``typer.Option(*declarations, **options)`` of a float (or ``float | None``) parameter,
    parsed by ``finite_float(min, max)``; the help shows the range as typer's would."""
    return typer.Option(*declarations, parser=finite_float(min, max), min=min, max=max,
                        **options)
