"""Counts in words for the lines people read: ``1 tick``, ``2 ticks``, ``0 ticks``."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``: in the singular for 1, else ``plural`` (default: ``noun`` + s)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
