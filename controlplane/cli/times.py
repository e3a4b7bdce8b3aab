"""Times given on the command line (``--until``, ``--start``, ``--end``)."""

from __future__ import annotations

from datetime import UTC, datetime

from forecaster.errors import InputError


def parse_utc(value: str, option: str) -> datetime:
    """An ISO-8601 time, in UTC (UTC when it names no zone); InputError naming ``option``."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"{option} {value!r}: not an ISO-8601 time (e.g. "
                         "2026-12-24T18:00:00Z)") from None
    try:
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:00-05:00: past the last time there is, in UTC
        raise InputError(f"{option} {value!r}: out of range in UTC (years 1 to 9999)") from None
