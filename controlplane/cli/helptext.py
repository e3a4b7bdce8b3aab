"""Help text that reflows: Typer's Rich help keeps every newline of a docstring, so a paragraph
wrapped at the source's line length shows up ragged in a terminal of any other width."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])


def reflow(doc: str) -> str:
    """The docstring with each paragraph on one line (paragraphs stay apart by a blank line)."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def reflowed(command: F) -> F:
    """Decorator for a command (below ``@app.command``): its help reflows to the terminal."""
    if command.__doc__:
        command.__doc__ = reflow(command.__doc__)
    return command
