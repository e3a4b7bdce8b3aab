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


def describe_range(low: float | None, high: float | None, low_open: bool = False) -> str:
    """``0.1<=x<=10000.0``, ``0.0<x<=5.0``, ``x>=0.0`` or ``x<=5.0`` (click's spelling, as the
    help shows it); "" when unbounded. ``low_open``: ``low`` itself is out of range."""
    above = "<" if low_open else "<="
    if low is not None and high is not None:
        return f"{float(low)}{above}x<={float(high)}"
    if low is not None:
        return f"x>{'' if low_open else '='}{float(low)}"
    return f"x<={float(high)}" if high is not None else ""


def finite_float(low: float | None = None, high: float | None = None,
                 low_open: bool = False) -> Callable[[object], float]:
    """The parser of a float option: its text (or its default) -> the number. Raises
    BadParameter, which click prints naming the option, for no number, nan or an infinity, or a
    number outside [low, high] (with ``low_open``, (low, high])."""
    bounds = describe_range(low, high, low_open)

    def parse(value: object) -> float:
        try:
            number = float(str(value))  # the option's text, or its default
        except ValueError:
            raise typer.BadParameter(f"{value!r} is not a number") from None
        if not math.isfinite(number):
            where = f" in the range {bounds}" if bounds else ""
            raise typer.BadParameter(f"{value} is not a finite number{where}")
        below = low is not None and (number <= low if low_open else number < low)
        if below or (high is not None and number > high):
            raise typer.BadParameter(f"{number} is not in the range {bounds}")
        return number

    return parse


def float_option(*declarations: Any, min: float | None = None, max: float | None = None,
                 min_open: bool = False, **options: Any) -> Any:
    """``typer.Option(*declarations, **options)`` of a float (or ``float | None``) parameter,
    parsed by ``finite_float(min, max, min_open)``; the help shows the range as typer's would
    (typer cannot show an open bound: with ``min_open`` it ends the option's help text)."""
    parser = finite_float(min, max, min_open)
    if min_open:
        options["help"] = f"{options.get('help', '')} [{describe_range(min, max, True)}]"
        min, max = None, None  # typer would show [min<=x<=max]
    return typer.Option(*declarations, parser=parser, min=min, max=max, **options)
