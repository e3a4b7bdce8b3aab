"""``headroom simulate --hints F.csv``: demand announced ahead, replayed as the live loop applies
``headroom hint add`` (floors on the predictive policy's forecasts).

Columns ``model,start,end,rate_rps`` and optionally ``reason``; times ISO 8601 (UTC unless they
name a zone), the end excluded. Every problem names the file, the line and the column; each bad
line's is listed, and nothing of a bad file is used."""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from controlplane.domain.errors import listed_problems
from controlplane.domain.hints import MAX_HINT_RPS, DemandHint

COLUMNS = ("model", "start", "end", "rate_rps")


class HintsFileError(ValueError):
    """A hints file that cannot be used; the message names the file, line and column."""


def _time(text: str, where: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise HintsFileError(f"{where}: {text!r} is not an ISO-8601 time") from None
    try:
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:00-05:00: past the last time there is, in UTC
        raise HintsFileError(f"{where}: {text!r} is out of range in UTC (years 1 to "
                             "9999)") from None


def _rate(text: str, where: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        raise HintsFileError(f"{where}: {text!r} is not a number") from None
    if not (math.isfinite(rate) and 0 < rate <= MAX_HINT_RPS):  # a hint of 0 floors nothing
        raise HintsFileError(f"{where}: {text} is not a rate in (0, {MAX_HINT_RPS:g}] rps")
    return rate


def _hint(row: dict[str, str | None], at: str, models: Collection[str]) -> DemandHint:
    """The hint of one line; HintsFileError naming ``at`` (file and line) and the column."""
    model = (row["model"] or "").strip()
    if model not in models:
        raise HintsFileError(f"{at} column model: {model!r} is not in the models file "
                             f"({', '.join(sorted(models))})")
    start_at = _time(row["start"] or "", f"{at} column start")
    end_at = _time(row["end"] or "", f"{at} column end")
    if end_at <= start_at:
        raise HintsFileError(f"{at} column end: {(row['end'] or '').strip()} is not after "
                             f"start {(row['start'] or '').strip()}")
    rate = _rate(row["rate_rps"] or "", f"{at} column rate_rps")
    try:
        return DemandHint(model, rate, start_at, end_at, (row.get("reason") or "").strip())
    except ValueError as error:
        raise HintsFileError(f"{at}: {error}") from None


def load_hints_file(path: Path, models: Collection[str]) -> tuple[DemandHint, ...]:
    """The hints of ``path`` for the models file's ``models``, in file order; HintsFileError
    listing the first problem of each bad line (``listed_problems``)."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's BOM is not a column name
    except UnicodeDecodeError as error:
        raise HintsFileError(f"--hints {path}: not UTF-8 text (byte {error.start}: "
                             f"{error.reason})") from None
    except OSError as error:
        raise HintsFileError(f"--hints {path}: cannot read: {error.strerror or error}") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise HintsFileError(f"--hints {path}: missing column(s) {', '.join(missing)} (columns: "
                             f"{','.join(COLUMNS)}[,reason])")
    hints, problems = [], []
    for line, row in enumerate(reader, start=2):
        try:
            hints.append(_hint(row, f"--hints {path} line {line}", models))
        except HintsFileError as error:  # the next lines too: every mistake in one run
            problems.append(str(error))
    if problems:
        raise HintsFileError(listed_problems(problems))
    return tuple(hints)


def hints_outside(hints: Sequence[DemandHint], since_at: datetime, until_at: datetime,
                  lead_s: float) -> list[DemandHint]:
    """The hints whose window, opened ``lead_s`` early, does not meet [since_at, until_at):
    the trace's minutes; such a hint floors no forecast of the replay (a wrong year, say)."""
    return [h for h in hints if not h.overlaps(since_at, until_at + timedelta(seconds=lead_s))]
