"""Error taxonomy at the boundaries (STYLE.md 3.7 #8)."""

from __future__ import annotations

from collections.abc import Sequence

#: the problems of one input file an error lists, before it says how many more there are
SHOWN_PROBLEMS = 20


class TransientError(Exception):
    """Retry on the next tick (network blip, API unavailable)."""


class PermanentError(Exception):
    """Stop retrying this action and alert (forbidden, invalid object)."""


class ConflictError(TransientError):
    """Someone else changed the object (HTTP 409): re-read and retry on the next tick."""


class Fenced(Exception):
    """A leader's save refused because another leadership term claimed a newer fencing token
    (``store/tick_fence.py``): this process no longer leads; never retried."""

    def __init__(self, token: int, newest: int | None, holder: str) -> None:
        self.token, self.newest, self.holder = token, newest, holder
        by = f"{newest}, claimed by {holder or 'unknown'}" if newest is not None else "none"
        super().__init__(f"leader's writes: fenced: this process's token {token} is not the "
                         f"store's newest ({by}); another replica has led since")


def error_line(error: BaseException) -> str:
    """The first line of an error (the driver's own message when SQLAlchemy wraps one, as
    ``orig``), for one-line reports; the error's type when it has no text."""
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def listed_problems(lines: Sequence[str], shown: int = SHOWN_PROBLEMS) -> str:
    """Every problem found in one input, one a line, so that a file with three mistakes is
    mended in one edit, not three: ``shown`` lines at most, then ``... and N more``."""
    if len(lines) <= shown:
        return "\n".join(lines)
    return "\n".join([*lines[:shown], f"... and {len(lines) - shown} more"])
