"""Times as people and scripts read them: every UTC time Headroom prints (the CLI's tables,
lines and ``--json`` documents, the dashboard's commands) is RFC 3339 with a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_text(at: datetime) -> str:
    """``at`` in UTC as RFC 3339 with a ``Z``: ``2026-12-03T08:00:00Z``, a fraction of a second
    kept when it has one (``...T08:00:00.250000Z``); a time without a zone is taken as UTC.
    Never ``+00:00``: one spelling for whoever greps or parses the output."""
    utc = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return utc.replace(tzinfo=None).isoformat() + "Z"
