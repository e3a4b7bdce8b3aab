"""Error taxonomy at the boundaries (STYLE.md 3.7 #8)."""


class TransientError(Exception):
    """Retry on the next tick (network blip, API unavailable)."""


class PermanentError(Exception):
    """Stop retrying this action and alert (forbidden, invalid object)."""


class ConflictError(TransientError):
    """Someone else changed the object (HTTP 409): re-read and retry on the next tick."""


def error_line(error: BaseException) -> str:
    """The first line of an error (the driver's own message when SQLAlchemy wraps one, as
    ``orig``), for one-line reports; the error's type when it has no text."""
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__
