"""``headroom forecast run --csv``: the trace's values in requests/s, and which of its series a
run stores.

A trace in requests per minute, or in counts per trace step, is converted with ``simulate``'s
converter (``controlplane.simulation.trace.to_rps``) before anything is forecast: stored as it
is, it would be read as requests/s, 60 times too high for a per-minute count, and the reconcile
loop sizes replicas from it. The converted trace keeps the file's rows, times and missing
values; only the values are scaled.

When the run stores its forecasts, the series are checked against the store's models table
(``csv_coverage``): a series that is no model of it is neither forecast nor stored but named,
and a model of it without rows in the trace is named too (it gets no forecast from this run).
A store whose models table is empty stores every series, as before the table was checked, with
a warning. Pure functions of values; the command reads the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from controlplane.forecast_job import Shard
from controlplane.simulation.trace import check_value_unit, to_rps, trace_step_s
from forecaster.prepare import NS_PER_S
from forecaster.sources.replay import RawSeries, Trace


def trace_in_rps(trace: Trace, value_unit: str) -> Trace:
    """``trace`` with its values in requests/s from ``value_unit`` (rps, rpm, per-step: a count
    per trace step, the most common spacing of its rows, as ``simulate`` reads one)."""
    check_value_unit(value_unit)
    if value_unit == "rps":
        return trace
    gaps_s = {s.series_id: np.diff(np.unique(s.times_ns)) / NS_PER_S for s in trace.series}
    step_s = trace_step_s(gaps_s)
    return replace(trace, series=tuple(
        RawSeries(s.series_id, s.times_ns, to_rps(s.values, value_unit, step_s))
        for s in trace.series))


def only_series(trace: Trace, names: Sequence[str]) -> Trace:
    """``trace`` with only the series named in ``names``."""
    keep = set(names)
    return replace(trace, series=tuple(s for s in trace.series if s.series_id in keep))


@dataclass(frozen=True, slots=True)
class CsvCoverage:
    """The series of a ``--csv`` trace against the store's models table."""

    stored: tuple[str, ...]  # series forecast and stored (every one when the table is empty)
    not_in_models: tuple[str, ...]  # series the table does not list: not forecast, not stored
    without_rows: tuple[str, ...]  # models of the table without rows in the trace
    table_empty: bool  # no model listed: every series is stored

    def as_doc(self) -> dict[str, object]:
        return {"not_in_models": list(self.not_in_models),
                "models_without_rows": list(self.without_rows),
                "models_table_empty": self.table_empty}


def csv_coverage(series: Sequence[str], listed: Sequence[str], wanted: Sequence[str] | None,
                 shard: Shard) -> CsvCoverage:
    """Which of ``series`` (the trace's) a run of ``shard`` stores, given the models table
    (``listed``) and ``--models`` (``wanted``, None: all). Only the shard's names are reported:
    each shard names its own."""
    if not listed:
        return CsvCoverage(tuple(series), (), (), table_empty=True)
    known, rows = set(listed), set(series)
    expected = [m for m in listed if wanted is None or m in wanted]
    return CsvCoverage(
        stored=tuple(s for s in series if s in known),
        not_in_models=tuple(s for s in series if s not in known and shard.owns(s)),
        without_rows=tuple(m for m in expected if m not in rows and shard.owns(m)),
        table_empty=False)


def coverage_warnings(c: CsvCoverage, csv: str) -> list[str]:
    """The warning lines of a run that checked its ``--csv`` series against the models table."""
    if c.table_empty:
        return [f"the store's models table is empty: the forecasts of every series of --csv "
                f"{csv} are stored as they are (import the models with `headroom models "
                "import` to store only theirs)"]
    lines = [f"series {s!r} of --csv {csv} is not in the store's models table: not forecast, "
             "not stored (import it with `headroom models import`, or check the --series-col "
             "names)" for s in c.not_in_models]
    lines += [f"model {m!r} of the models table has no rows in --csv {csv}: no forecast for it "
              "from this run" for m in c.without_rows]
    if not c.stored:
        lines.append(f"no forecast stored: no series of --csv {csv} is a model of the store's "
                     "models table")
    return lines
