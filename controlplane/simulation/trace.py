"""The demand trace of ``headroom simulate``: a long CSV (time, model, rate) -> per-minute rates.

Steps coarser than a minute are held constant within the step; finer steps are averaged into
minutes. Bad input is refused with the file, line, model and column at fault: unknown or missing
models, gaps in a model's series (unless ``fill_gaps`` says how to fill them), negative or
non-numeric rates, duplicate rows. No model is ever dropped silently. A line named is the
file's own line, blank lines counted. Rows out of order are sorted, and ``--time-unit`` given
for a column of timestamps is ignored (as ``forecast`` ignores it), each with a warning
(``Trace.warnings``).

A numeric time column read in the wrong ``--time-unit`` is refused, not squashed or stretched:
when the unit puts the times outside 2000-2100 but another unit puts all of them inside (epoch
seconds given as ms), or a model's rows come out mostly under a second apart, the message names
the file, the column, the unit and the unit that would make sense. Numbers that are no epoch
time in any unit (minutes since the trace's start) are read as given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from controlplane.domain.timestamps import utc_text
from controlplane.simulation.cells import shown
from forecaster.prepare import GRID_TOLERANCE
from forecaster.sources.replay import line_of_row, repeated_column

RatesT = TypeVar("RatesT", pd.Series, np.ndarray)
VALUE_UNITS = {"rps": 1.0, "rpm": 1 / 60}  # plus "per-step": a count per trace step
#: how a gap in a model's series fills: none refuses it; hold takes the last value (before a
#: model's first row, its first); zero; hold-after-first holds, but before a model's first row
#: is zero (a model added inside the trace had no demand before it)
FILL_GAPS = ("none", "hold", "zero", "hold-after-first")
TIME_UNITS = {"s": 1, "ms": 1e-3, "min": 60, "h": 3600}
_MAX_SECONDS = 9.2e9  # pandas timestamps (datetime64[ns]) end in 2262
#: epoch seconds of 2000-01-01 and 2100-01-01 UTC: a numeric time column whose values all land
#: in this span under one unit and outside it under the given one is in that other unit
_PLAUSIBLE_EPOCH_S = (946_684_800.0, 4_102_444_800.0)


class TraceError(ValueError):
    """A trace that cannot be replayed; the message names file, line, model and column."""


@dataclass(frozen=True, slots=True)
class Trace:
    start_at: datetime  # the first minute
    step_s: int  # the trace's own step (most common spacing)
    rates_rps: Mapping[str, np.ndarray]  # per model, one rate per minute from start_at
    source: str
    filled: Mapping[str, int]  # per model, minutes filled in a gap (fill_gaps != none)
    #: what reading it took in its stride (rows out of order, an --time-unit of ISO times)
    warnings: tuple[str, ...] = ()

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.rates_rps)

    @property
    def minutes(self) -> int:
        return len(next(iter(self.rates_rps.values())))

    def minute_at(self, minute: int) -> datetime:
        return self.start_at + timedelta(minutes=minute)

    def peak_rps(self, model: str) -> float:
        return float(self.rates_rps[model].max())


def _epoch_unit_instead(numbers: np.ndarray, time_unit: str) -> str | None:
    """The unit to suggest when ``time_unit`` puts the numbers outside 2000-2100 and another
    unit puts all of them inside (epoch seconds given as ms), else None. The span is narrower
    than a factor of 60, so at most one unit dates them."""
    lo, hi = _PLAUSIBLE_EPOCH_S
    dating = [unit for unit, unit_s in TIME_UNITS.items()
              if bool(np.all((numbers * unit_s >= lo) & (numbers * unit_s < hi)))]
    return None if time_unit in dating else next(iter(dating), None)


def _span(first_s: float, last_s: float, fmt: str = "%Y-%m-%d %H:%M") -> str:
    first, last = (pd.Timestamp(s, unit="s") for s in (first_s, last_s))
    return f"from {first.strftime(fmt)} to {last.strftime(fmt)} UTC"


def _numeric_times(raw: pd.Series, numeric: pd.Series, col: str, path: Path,
                   time_unit: str) -> pd.Series:
    bad = numeric.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise TraceError(f"{path}: line {line_of_row(path, row)}: column {col!r}: "
                         f"{shown(raw.iloc[row])} is not a number of {time_unit}")
    numbers = numeric.to_numpy(np.float64)
    instead = _epoch_unit_instead(numbers, time_unit)
    hint = "" if instead is None else (
        f"; as {instead} since 1970 they run "
        f"{_span(numbers.min() * TIME_UNITS[instead], numbers.max() * TIME_UNITS[instead])}: "
        f"pass --time-unit {instead}")
    seconds = numbers * TIME_UNITS[time_unit]
    outside = ~(np.abs(seconds) < _MAX_SECONDS)
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise TraceError(f"{path}: line {line_of_row(path, row)}: column {col!r}: "
                         f"{shown(raw.iloc[row])} {time_unit} since 1970 is out of range "
                         "(years 1678-2261)"
                         f"{hint or '; is --time-unit right?'}")
    if instead is not None:
        raise TraceError(f"{path}: column {col!r}: with --time-unit {time_unit} the times run "
                         f"{_span(seconds.min(), seconds.max(), '%Y-%m-%d %H:%M:%S')}, outside "
                         f"2000-2100{hint}")
    return pd.to_datetime(pd.Series(seconds, index=raw.index), unit="s", utc=True)


def _times(frame: pd.DataFrame, col: str, path: Path, time_unit: str | None
           ) -> tuple[pd.Series, list[str]]:
    """The times of column ``col``: numbers in ``time_unit``, or timestamps when it is None or
    no cell is a number (the unit is then ignored, as ``forecast`` ignores it, with a warning).
    """
    raw = frame[col]
    numeric = pd.to_numeric(raw, errors="coerce")
    if time_unit is not None and not _timestamps_only(raw, numeric):
        return _numeric_times(raw, numeric, col, path, time_unit), []
    ignored = [] if time_unit is None else [
        f"{path}: column {col!r} holds timestamps, not numbers: --time-unit {time_unit} is "
        "ignored"]
    if numeric.notna().all():
        raise TraceError(f"{path}: column {col!r} is numeric: pass --time-unit s|ms|min|h")
    parsed = pd.to_datetime(raw, utc=True, errors="coerce", format="mixed")
    bad = parsed.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise TraceError(f"{path}: line {line_of_row(path, row)}: column {col!r}: "
                         f"{shown(raw.iloc[row])} is not a timestamp")
    return parsed, ignored


def _timestamps_only(raw: pd.Series, numeric: pd.Series) -> bool:
    """No cell is a number and some are not empty: ISO text, whatever ``--time-unit`` says."""
    return bool(numeric.isna().all() and raw.notna().any())


def _unsorted(path: Path, times: pd.Series, series: pd.Series) -> list[str]:
    """One warning per model whose rows are not in time order (the replay sorts them)."""
    return [f"{path}: model {name!r}: timestamps were out of order (sorted)"
            for name, model_times in times.groupby(series, sort=True)
            if not model_times.is_monotonic_increasing]


def _read(path: Path, time_col: str, series_col: str | None, value_col: str) -> pd.DataFrame:
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file")
    wanted = [c for c in (time_col, series_col, value_col) if c]
    try:
        frame = pd.read_csv(path, dtype={series_col: str} if series_col else None)
    except pd.errors.EmptyDataError:
        raise TraceError(f"{path}: empty file: expected a header with columns {wanted} "
                         "and rows") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        raise TraceError(f"{path}: not a readable CSV ({str(error).splitlines()[0]})") from None
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise TraceError(f"{path}: missing column(s) {missing}; found {list(frame.columns)}")
    repeated = repeated_column(path, wanted)
    if repeated:
        raise TraceError(f"{path}: {repeated}")
    if frame.empty:
        raise TraceError(f"{path}: no rows")
    return frame


def _series(frame: pd.DataFrame, col: str, path: Path) -> pd.Series:
    names = frame[col]
    empty = names.isna() | (names.astype(str).str.strip() == "")
    if empty.any():
        line = line_of_row(path, int(np.flatnonzero(empty.to_numpy())[0]))
        raise TraceError(f"{path}: line {line}: column {col!r} is empty")
    return names.astype(str)


def _rates(frame: pd.DataFrame, value_col: str, series: pd.Series, path: Path) -> pd.Series:
    values = pd.to_numeric(frame[value_col], errors="coerce")
    bad = values.isna() | ~np.isfinite(values.fillna(0)) | (values < 0)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise TraceError(f"{path}: line {line_of_row(path, row)}: model {series.iloc[row]!r}: "
                         f"{value_col} must be a finite number >= 0, got "
                         f"{shown(frame[value_col].iloc[row])}")
    return values.astype(float)


def _gaps_s(times: pd.Series, series: pd.Series) -> dict[str, np.ndarray]:
    """Per model, the seconds between its consecutive distinct times."""
    seconds = (times - times.min()).dt.total_seconds()
    gaps = {str(name): np.diff(np.sort(t.to_numpy())) for name, t in seconds.groupby(series)}
    return {name: d[d > 0] for name, d in gaps.items()}


_MINUTE_DIVISORS_S = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)


def trace_step_s(gaps_s: Mapping[str, np.ndarray]) -> int:
    """The most common spacing, taken as the whole minutes or the divisor of a minute it is
    within ``GRID_TOLERANCE`` of (scrape jitter: gaps of 58-62 s are a 60 s step)."""
    diffs = [round(d) for d in np.concatenate([np.zeros(0), *gaps_s.values()])]
    if not diffs:
        return 60
    values, counts = np.unique(diffs, return_counts=True)
    common_s = int(values[np.argmax(counts)])
    regular_s = [*_MINUTE_DIVISORS_S, max(1, round(common_s / 60)) * 60]
    nearest_s = min(regular_s, key=lambda step_s: abs(step_s - common_s))
    return nearest_s if abs(nearest_s - common_s) <= GRID_TOLERANCE * nearest_s else common_s


def _coarser_unit_hint(gap_s: float, time_unit: str | None) -> str:
    """``"; as s they are 300 s apart: is --time-unit s right?"``: the next coarser unit that
    spaces rows ``gap_s`` apart (read in ``time_unit``) a second or more, else ``""``."""
    if time_unit is None:
        return ""
    for unit, unit_s in TIME_UNITS.items():
        gap_as_unit_s = gap_s * unit_s / TIME_UNITS[time_unit]
        if unit_s > TIME_UNITS[time_unit] and gap_as_unit_s >= 1:
            return f"; as {unit} they are {gap_as_unit_s:g} s apart: is --time-unit {unit} right?"
    return ""


def _check_spacing(path: Path, col: str, time_unit: str | None,
                   gaps_s: Mapping[str, np.ndarray], step_s: int) -> None:
    """Refuse rows mostly under a second apart (the finest trace step is 1 s): with a numeric
    time column, most likely a unit too fine (relative seconds given as ms)."""
    typical_s = {name: float(np.median(d)) for name, d in sorted(gaps_s.items()) if d.size}
    fine = [(name, gap_s) for name, gap_s in typical_s.items() if gap_s < 1]
    if not fine and step_s >= 1:
        return
    name, gap_s = fine[0] if fine else ("", min(typical_s.values()))
    whose = f"model {name!r}: its rows are" if name else "a model's rows are"
    given = "" if time_unit is None else f" with --time-unit {time_unit}"
    raise TraceError(f"{path}: column {col!r}: {whose} mostly {gap_s:.3g} s apart{given}; the "
                     f"finest trace step is 1 s{_coarser_unit_hint(gap_s, time_unit)}")


def load_trace(path: Path, *, time_col: str = "ts", series_col: str | None = "model",
               value_col: str = "rate_rps", models: Sequence[str] = (),
               value_unit: str = "rps", fill_gaps: str = "none",
               time_unit: str | None = None, single_series: str = "default") -> Trace:
    """Read a trace. ``models`` (from the models file) must match the trace's models exactly."""
    if fill_gaps not in FILL_GAPS:
        raise TraceError(f"--fill-gaps must be one of {', '.join(FILL_GAPS)}, got {fill_gaps!r}")
    check_value_unit(value_unit)
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise TraceError(f"--time-unit must be one of {', '.join(TIME_UNITS)}, got {time_unit!r}")
    frame = _read(path, time_col, series_col, value_col)
    series = (_series(frame, series_col, path) if series_col
              else pd.Series([single_series] * len(frame)))
    times, warnings = _times(frame, time_col, path, time_unit)
    rates = _rates(frame, value_col, series, path)
    dup = pd.DataFrame({"t": times, "m": series}).duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise TraceError(f"{path}: line {line_of_row(path, row)}: second row for model "
                         f"{series.iloc[row]!r} at {times.iloc[row]}")
    known = set(models)
    if known:
        for name in sorted(set(series) - known):
            line = line_of_row(path, int(np.flatnonzero((series == name).to_numpy())[0]))
            raise TraceError(f"{path}: line {line}: model {name!r} is not in the models file "
                             f"(models: {sorted(known)})")
        for name in sorted(known - set(series)):
            raise TraceError(f"{path}: model {name!r} of the models file has no rows in the trace")
    gaps_s = _gaps_s(times, series)
    step_s = trace_step_s(gaps_s)
    _check_spacing(path, time_col, time_unit, gaps_s, step_s)
    if step_s < 60 and 60 % step_s:
        raise TraceError(f"{path}: step of {step_s}s does not divide a minute")
    if step_s >= 60 and step_s % 60:
        raise TraceError(f"{path}: step of {step_s}s is not a whole number of minutes")
    rates = to_rps(rates, value_unit, step_s)
    trace = _to_minutes(path, times, series, rates, step_s, fill_gaps,
                        tuple(models) or tuple(sorted(set(series))))
    return replace(trace, warnings=(*warnings, *_unsorted(path, times, series)))


def check_value_unit(value_unit: str) -> None:
    """Refuse a ``--value-unit`` that is none of rps, rpm, per-step."""
    if value_unit not in (*VALUE_UNITS, "per-step"):
        raise TraceError(f"--value-unit must be rps, rpm or per-step, got {value_unit!r}")


def to_rps(rates: RatesT, value_unit: str, step_s: float) -> RatesT:
    """A trace's values in ``value_unit`` (rps, rpm, or per-step: a count per trace step of
    ``step_s``) as requests per second: the one conversion of ``simulate``'s and ``forecast run
    --csv``'s traces."""
    check_value_unit(value_unit)
    return rates / step_s if value_unit == "per-step" else rates * VALUE_UNITS[value_unit]


def grid_offsets_s(path: Path, times: pd.Series, step_s: int) -> np.ndarray:
    """Each row's offset in seconds from the minute of the trace's first time. A grid of a
    minute or more starts at the first time, whatever its seconds (a scrape at :53 of every
    10 minutes is regular), and a row within ``GRID_TOLERANCE`` of a step of its grid (scrape
    jitter) is taken at that step, which the replay starts at a whole minute; a row further off
    is refused, naming its line. Finer steps keep their offsets (averaged per minute)."""
    first = times.min()
    phase_s = (first - first.floor("min")).total_seconds()
    offsets_s = (times - first).dt.total_seconds().to_numpy()
    if step_s < 60:
        return np.asarray(offsets_s + phase_s, dtype=float)
    snapped_s = np.round(offsets_s / step_s) * step_s
    off = np.abs(offsets_s - snapped_s) > GRID_TOLERANCE * step_s
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise TraceError(f"{path}: line {line_of_row(path, row)}: time {utc_text(times.iloc[row])} "
                         f"is {offsets_s[row] - snapped_s[row]:+g}s off the trace's {step_s}s "
                         f"grid, which starts at its first time {utc_text(first)}")
    return np.asarray(snapped_s, dtype=float)


def _to_minutes(path: Path, times: pd.Series, series: pd.Series, rates: pd.Series, step_s: int,
                fill_gaps: str, order: tuple[str, ...]) -> Trace:
    start = times.min().floor("min")
    grid_s = max(step_s, 60)
    all_offsets_s = grid_offsets_s(path, times, step_s)
    minutes = int(all_offsets_s.max() // 60) + grid_s // 60
    out: dict[str, np.ndarray] = {}
    filled: dict[str, int] = {}
    for name in order:
        mask = (series == name).to_numpy()
        offsets_s = all_offsets_s[mask]
        minute_idx = (offsets_s // 60).astype(int)
        per_minute = pd.Series(rates[mask].to_numpy()).groupby(minute_idx).mean()
        values = np.full(minutes, np.nan)
        per_step = grid_s // 60
        for m, rate in per_minute.items():
            values[int(m): int(m) + per_step] = rate
        gaps = np.isnan(values)
        if gaps.any():
            first = int(np.flatnonzero(gaps)[0])
            if fill_gaps == "none":
                first_at = (start + pd.Timedelta(minutes=first)).to_pydatetime()
                raise TraceError(
                    f"{path}: model {name!r}: no data for {int(gaps.sum())} minute(s), first at "
                    f"{utc_text(first_at)}; pass --fill-gaps hold, zero or hold-after-first to "
                    "replay anyway")
            filled[name] = int(gaps.sum())
            if fill_gaps == "zero":
                values[gaps] = 0.0
            elif fill_gaps == "hold-after-first":
                values = pd.Series(values).ffill().fillna(0.0).to_numpy()
            else:
                values = pd.Series(values).ffill().bfill().to_numpy()
        out[name] = values
    start_at = start.to_pydatetime().astimezone(UTC)
    return Trace(start_at, step_s, out, str(path), filled)
