"""Error taxonomy at the boundaries (STYLE.md 3.7 #8)."""


class TransientError(Exception):
    """Retry on the next tick (network blip, API unavailable)."""


class PermanentError(Exception):
    """Stop retrying this action and alert (forbidden, invalid object)."""


class ConflictError(TransientError):
    """Someone else changed the object (HTTP 409): re-read and retry on the next tick."""
