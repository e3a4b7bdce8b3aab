"""CSV traces -> series (tests, the backtest CLI, the forecast job's ``--csv`` source).

A long CSV: one row per (time, series) with a value column; without a series column the whole
file is one series named after the value column. Times are ISO text (naive = UTC) or numbers in
``time_unit``. Bad input raises ``InputError``/``SeriesError`` naming the file, column, the
file's own line (blank lines counted) or series (also: a used column twice in the header, an
empty series name, a numeric time outside datetime64[ns] in its unit); non-numeric, infinite
and implausibly large values (above ``MAX_VALUE``) are missing data, counted per series in its
cleaning warnings, never zeros, and never fail another series or the file.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.errors import InputError, SeriesError
from forecaster.prepare import (
    GRID_TOLERANCE,
    MAX_VALUE,
    NO_NUMBERS,
    NS_PER_S,
    Prepared,
    duplicate_timestamps,
    grid_index,
    last_clipped,
    regularize,
    step_means,
    unusable_problem,
)
from forecaster.types import SourcedSeries, TrafficSeries

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
TIME_UNITS_NS = {"s": 10**9, "ms": 10**6, "min": 60 * 10**9, "h": 3600 * 10**9}
#: numeric times map to datetime64[ns]: years 1678 to 2261
_MAX_NS = float(np.iinfo(np.int64).max)


@dataclass(frozen=True, slots=True, eq=False)
class RawSeries:
    series_id: str
    times_ns: IntArray
    values: FloatArray


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    path: Path
    series: tuple[RawSeries, ...]
    time_unit: str | None  # None: ISO timestamps; else the unit of a numeric time column

    def format_times(self, times_ns: IntArray) -> list[str]:
        """Times in the file's own convention (ISO UTC text, or numbers in ``time_unit``)."""
        if self.time_unit is None:
            whole = bool(np.all(times_ns % 10**9 == 0))
            text = np.datetime_as_string(times_ns.astype("datetime64[ns]"),
                                         unit="s" if whole else "us")
            return [t.replace("T", " ") for t in text.tolist()]
        per = TIME_UNITS_NS[self.time_unit]
        if bool(np.all(times_ns % per == 0)):
            return [str(int(x)) for x in (times_ns // per).tolist()]
        return [repr(float(x)) for x in (times_ns / per).tolist()]


def read_trace(path: Path, time_col: str, value_col: str, series_col: str | None = None,
               time_unit: str | None = None, only: list[str] | None = None) -> Trace:
    frame = _read(path, series_col)
    needed = [time_col, value_col] + ([series_col] if series_col else [])
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        found = ", ".join(str(c) for c in frame.columns)
        hint = ("; the header has ';' and no ',': is the file semicolon-delimited? Save it "
                "comma-separated" if ";" in found and "," not in found else "")
        raise InputError(f"{path}: no column {missing[0]!r} (found: {found}){hint}")
    if frame.empty:
        raise InputError(f"{path}: no data rows")
    repeated = repeated_column(path, needed)
    if repeated:
        raise InputError(f"{path}: {repeated}")
    times, unit = _times_ns(frame[time_col], time_unit, f"{path}: column {time_col!r}",
                            lambda row: line_of_row(path, row))
    values = pd.to_numeric(frame[value_col], errors="coerce").to_numpy(np.float64, copy=True)
    # implausibly large: missing, as infinite values are (``CleaningReport.too_large``)
    values[np.isfinite(values) & (np.abs(values) > MAX_VALUE)] = np.inf
    if series_col:
        empty = frame[series_col].isna() | (frame[series_col].astype(str).str.strip() == "")
        if empty.any():
            raise InputError(f"{path}: column {series_col!r}: empty series name at line "
                             f"{line_of_row(path, int(empty.to_numpy().argmax()))}")
    names = (frame[series_col].astype(str).to_numpy() if series_col
             else np.full(len(frame), value_col, dtype=object))
    wanted = list(pd.unique(names)) if only is None else list(dict.fromkeys(only))  # once each
    unknown = [s for s in wanted if s not in set(names.tolist())]
    if unknown:
        raise InputError(f"{path}: series {unknown[0]!r} not found in column {series_col!r}")
    out = [RawSeries(str(n), times[names == n], values[names == n]) for n in wanted]
    return Trace(path, tuple(out), unit)


def prepare_all(trace: Trace) -> tuple[list[Prepared], list[SeriesError]]:
    """Regularize every series; a broken series is reported, the others carry on."""
    ok: list[Prepared] = []
    bad: list[SeriesError] = []
    for raw in trace.series:
        try:
            problem = series_problem(raw.values)
            if problem is not None:
                raise SeriesError(raw.series_id, problem)
            if raw.times_ns.size < 2:
                raise SeriesError(raw.series_id, "fewer than two rows")
            ok.append(regularize(raw.series_id, raw.times_ns, raw.values))
        except SeriesError as exc:
            bad.append(exc)
    return ok, bad


def series_problem(values: FloatArray) -> str | None:
    """``unusable_problem``, naming infinite and too-large values when they were all there
    was (they are missing data, not numbers to forecast)."""
    problem = unusable_problem(values)
    dropped = int(np.sum(np.isinf(values)))
    if problem == NO_NUMBERS and dropped:
        return (f"no usable value ({dropped} infinite or above {MAX_VALUE:g}, treated as "
                "missing)")
    return problem


def line_of_row(path: Path, row: int) -> int:
    """The file's own line number of data row ``row`` (0: the first row after the header), as
    pandas reads it: lines that are empty or only whitespace are skipped, a quoted field may
    span lines (the row's first line is given). Read again only for an error message."""
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        end, seen = 0, -1  # seen: data rows so far, -1 before the header
        for record in reader:
            start, end = end + 1, reader.line_num
            if not record or (len(record) == 1 and not record[0].strip()):
                continue
            if seen == row:
                return start
            seen += 1
    return row + 2


_UNIT_NAMES = {"minute": "min", "minutes": "min", "min": "min", "second": "s", "seconds": "s",
               "sec": "s", "s": "s", "ms": "ms", "millis": "ms", "milliseconds": "ms",
               "hour": "h", "hours": "h", "h": "h"}


def repeated_column(path: Path, columns: list[str]) -> str | None:
    """Why one of ``columns`` is ambiguous in the CSV's header (pandas would read the first of
    two equal names and rename the other), or None."""
    header = pd.read_csv(path, header=None, nrows=1, dtype=str).iloc[0].tolist()
    for col in columns:
        if header.count(col) > 1:
            return (f"column {col!r} appears {header.count(col)} times in the header; rename "
                    "all but one")
    return None


def infer_time_unit(name: str, col: pd.Series) -> str | None:
    """Unit of a numeric time column without ``--time-unit`` (documented fallback): from the
    column name (minute/second/ms/hour, also as a suffix like ``t_min``), else Unix seconds or
    milliseconds by magnitude; None when it cannot tell."""
    key = name.strip().lower()
    for word, unit in _UNIT_NAMES.items():
        if key == word or key.endswith("_" + word):
            return unit
    top = float(col.abs().max()) if col.notna().any() else 0.0
    if 1e9 <= top < 1e11:
        return "s"
    if 1e12 <= top < 1e14:
        return "ms"
    return None


def _read(path: Path, series_col: str | None) -> pd.DataFrame:
    """The CSV, its series column as text: model ``007`` stays ``007`` (not 7.0, nor one with
    model ``7``) and ``1e3`` stays ``1e3``."""
    if path.is_dir():
        raise InputError(f"{path}: a directory, not a CSV file")
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    try:
        return pd.read_csv(path, dtype={series_col: str} if series_col else None)
    except pd.errors.EmptyDataError as exc:
        raise InputError(f"{path}: empty file") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: {_not_utf8(path)}") from exc
    except pd.errors.ParserError as exc:
        raise InputError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from exc


def _not_utf8(path: Path) -> str:
    """Where the file stops being UTF-8 (pandas' error counts from the start of a buffer)."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return (f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} (save the file "
                "as UTF-8)")
    return "not UTF-8 text (save the file as UTF-8)"


def _times_ns(col: pd.Series, unit: str | None, what: str,
              line: Callable[[int], int]) -> tuple[IntArray, str | None]:
    """Unix-ns times and the unit of a numeric column (None for ISO text); ``line``: the
    file's line of a row, for errors."""
    if unit is not None and unit not in TIME_UNITS_NS:
        raise InputError(f"time unit {unit!r}: choose one of {', '.join(TIME_UNITS_NS)}")
    if pd.api.types.is_numeric_dtype(col):
        unit = unit or infer_time_unit(str(col.name), col)
        if unit is None:
            raise InputError(f"{what} is numeric; give its unit with --time-unit "
                             f"({', '.join(TIME_UNITS_NS)})")
        if col.isna().any():
            raise InputError(f"{what}: empty timestamp at line {line(int(col.isna().argmax()))}")
        scaled = col.to_numpy(np.float64) * TIME_UNITS_NS[unit]
        outside = np.flatnonzero(~(np.abs(scaled) < _MAX_NS))
        if outside.size:
            row = int(outside[0])
            raise InputError(f"{what}: {col.iloc[row]} at line {line(row)} is out of range as "
                             f"{unit} since 1970 (years 1678-2261); is the unit right?")
        return np.asarray(np.rint(scaled), np.int64), unit
    parsed = pd.to_datetime(col, utc=True, format="mixed", errors="coerce")
    if parsed.isna().any():
        row = int(parsed.isna().to_numpy().argmax())
        cell = col.iloc[row]
        if pd.isna(cell) or not str(cell).strip():
            raise InputError(f"{what}: empty timestamp at line {line(row)}")
        raise InputError(f"{what}: invalid timestamp at line {line(row)}: {str(cell)!r}")
    return np.asarray(parsed.dt.tz_convert(None).astype("datetime64[ns]").to_numpy()
                      .astype(np.int64)), None


class CsvSource:
    """``HistorySource`` over a trace: the rows of a model in [since, until) on a step grid.

    Same rules as the backtest: a repeated timestamp in any series refuses the whole file
    (``InputError`` naming the file, series and timestamp); in the requested window, rows out of
    order are sorted, NaN/text values are missing, negative values are clipped to 0, steps
    between the first and last row without a row are missing (not zeros), each counted in
    ``read_history``'s warnings, as are rows spaced wider than the step (a 10-minute series
    read at a 60-s step: the warning names the coarser step). A window without rows, or whose
    values are unusable (``unusable_problem``: none numeric, or none positive but some
    negative), is a ``SeriesError`` naming the problem as the backtest does, never a zero
    series.

    A row counts in the step it falls in, [t, t + step), unless it is within the tolerance of
    a grid time (``GRID_TOLERANCE`` of the step, or of the rows' own spacing when they are
    finer): then it counts at that time (scrape jitter), so rows a step apart give one value
    per step (10:00:00.4, 10:00:59.7, 10:02:00.3 are the 10:00, 10:01 and 10:02 steps). Rows
    that still share a step (two genuinely in it) are averaged, counted in the warnings as the
    backtest counts them (``step_means``), unless the rows are finer than the step: then
    averaging them is the resampling asked for. The window is the rows' steps:
    a row 0.3 s before ``until_at`` is the step at ``until_at``, not history.
    """

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._by_id = {s.series_id: s for s in trace.series}
        for raw in trace.series:
            duplicate = duplicate_timestamps(raw.series_id, np.sort(raw.times_ns))
            if duplicate is not None:
                raise InputError(f"{trace.path}: {duplicate}")

    def model_names(self) -> list[str]:
        return list(self._by_id)

    def last_ns(self) -> int:
        """Time of the newest row of the trace."""
        return max(int(s.times_ns.max()) for s in self.trace.series)

    def end_ns(self, step_s: int) -> int:
        """The forecast origin of a run at ``step_s`` on the UTC epoch grid (``forecast run
        --csv``): one step after the grid time the newest row counts at (10:19:59.7 is the 10:20
        step's row, so the origin is 10:21 and that row is history, not dropped as the origin's
        own step; 10:20:00.4 and 10:20:30 are the 10:20 step's too: the origin stays on the
        grid, never 10:21:00.4)."""
        newest = max(self.trace.series, key=lambda s: int(s.times_ns.max()))
        last_ns, step_ns = int(newest.times_ns.max()), step_s * NS_PER_S
        at = int(grid_index(np.array([last_ns], np.int64), step_ns,
                            _tolerance_ns(newest.times_ns, step_ns))[0]) * step_ns
        return at + step_ns

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        return self.read_history(model, since_at, until_at, step_s).series

    def read_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> SourcedSeries:
        """The model's mean value per step in [since_at, until_at) and the cleaning warnings."""
        raw = self._by_id.get(model)
        if raw is None:
            raise SeriesError(model, f"not in {self.trace.path}")
        lo, hi = _ns(since_at), _ns(until_at)
        step_ns = step_s * NS_PER_S
        steps = max(0, -(-(hi - lo) // step_ns))
        near = (raw.times_ns >= lo - GRID_TOLERANCE * step_ns) & (raw.times_ns < hi)
        step_of = grid_index(raw.times_ns[near] - lo, step_ns,
                             _tolerance_ns(raw.times_ns[near], step_ns))
        window = (step_of >= 0) & (step_of < steps)
        times, values = raw.times_ns[near][window], raw.values[near][window]
        problem = series_problem(values) if times.size else "no rows"
        if problem is not None:
            raise SeriesError(model, f"{problem} (in {self.trace.path} between "
                                     f"{since_at.isoformat()} and {until_at.isoformat()})")
        means, cleaning = step_means(model, times, values, step_of[window], steps)
        cleaning = replace(cleaning, last_clipped=last_clipped(times, values, step_of[window],
                                                               means))
        if _spacing_ns(times, step_ns) < (1 - GRID_TOLERANCE) * step_ns:
            cleaning = replace(cleaning, merged=0)  # rows finer than the step: the averaging asked
        series = TrafficSeries(series_id=model, step_s=step_s, start_at=since_at,
                               values=tuple(means.tolist()))
        return SourcedSeries(series, tuple(cleaning.warnings()) + _coarser(times, step_s))


def _tolerance_ns(times_ns: IntArray, step_ns: int) -> float:
    """How far off a grid time a row may be and still count at it: ``GRID_TOLERANCE`` of the
    step, or of the rows' median spacing when they are finer than the step by more than that
    (rows 10 s apart read at a 10-min step: 0.5 s, so a 10:09:50 row stays in the 10:00 step it
    falls in, and only a 10:09:59.7 row, the 10:10:00 scrape, counts at 10:10)."""
    spacing_ns = _spacing_ns(times_ns, step_ns)
    finer = spacing_ns < (1 - GRID_TOLERANCE) * step_ns
    return GRID_TOLERANCE * (spacing_ns if finer else float(step_ns))


def _spacing_ns(times_ns: IntArray, step_ns: int) -> float:
    """The rows' median spacing (the step when there are fewer than two times)."""
    spacings = np.diff(np.unique(times_ns))
    return float(np.median(spacings)) if spacings.size else float(step_ns)


def _coarser(times_ns: IntArray, step_s: int) -> tuple[str, ...]:
    """The warning for rows spaced wider than the step (their most common spacing), or ().
    Rows a step apart but for scrape jitter (``12:00:59.98``, ``12:02:00.03``) are not coarser:
    each counts at its nearest grid time."""
    spacings = np.diff(np.unique(times_ns))
    if not spacings.size:
        return ()
    values, counts = np.unique(spacings, return_counts=True)
    spacing_ns = int(values[int(np.argmax(counts))])
    if spacing_ns <= (1 + GRID_TOLERANCE) * step_s * NS_PER_S:
        return ()
    return (f"rows every {spacing_ns / 10**9:g} s, coarser than the step of {step_s} s: most "
            "steps have no row (missing data, not zeros); give --step "
            f"{-(-spacing_ns // 10**9)}s or coarser",)


def _ns(at: datetime) -> int:
    return (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
