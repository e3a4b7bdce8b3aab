"""Where ``headroom forecast run`` reads history from (``--csv``, ``--prometheus-url``, or the
store's models with the history ``serve`` reads for them) and its forecast origin (``--at``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from controlplane.adapters.clock import WallClock
from controlplane.cli.forecast_csv import trace_in_rps
from controlplane.cli.store_time import now_of
from controlplane.forecast_job import HistorySource
from controlplane.settings import ConfigError, Settings
from controlplane.settings_cluster import PrometheusSettings, http_url_problem
from controlplane.simulation.trace import check_value_unit
from controlplane.store import Store
from controlplane.store.engine import redact
from forecaster.errors import InputError
from forecaster.sources.replay import CsvSource, read_trace


def history_source(prometheus_url: str | None, settings: Settings, metric: str | None,
                   query: str | None, models: str | None, csv: Path | None, time_col: str,
                   value_col: str, series_col: str | None, units: tuple[str | None, str],
                   store_url: str, at: str | None, step_s: int) -> tuple[HistorySource, Any]:
    """The history source and the forecast origin ('now'; for a CSV: one step after the grid
    step its last row counts in, so the last row is part of the history and the origin is on
    the grid: ``CsvSource.end_ns``). Neither --csv nor --prometheus-url: the
    store's models (``--models``: each must be one of them), with the history ``serve`` reads
    for them (``backend: kubernetes``: Prometheus at ``prometheus.url``; else the store's
    observations). A name given twice in ``--models`` is forecast once. ``units``: the CSV's
    time unit and value unit (its values are read in requests/s)."""
    time_unit, value_unit = units
    wanted = wanted_models(models)
    if wanted == []:
        raise InputError(f"--models {models!r}: no model name; give comma-separated names or "
                         "leave it out for every model")
    if prometheus_url and csv:
        raise InputError("give either --prometheus-url or --csv, not both")
    url_problem = http_url_problem(prometheus_url) if prometheus_url else None
    if url_problem is not None:
        raise InputError(f"--prometheus-url: {url_problem}")
    check_value_unit(value_unit)
    if value_unit != "rps" and csv is None:
        raise InputError(f"--value-unit {value_unit}: only a --csv trace has a value unit "
                         "(Prometheus and the store give requests/s)")
    now = _parse_at(at) if at else None
    if csv is not None:
        trace = trace_in_rps(read_trace(csv, time_col, value_col, series_col, time_unit,
                                        wanted), value_unit)
        source = CsvSource(trace)
        end = pd.Timestamp(source.end_ns(step_s), tz="UTC").to_pydatetime()
        return source, now or end
    if prometheus_url:
        from controlplane.adapters.prometheus import prometheus_source

        return (prometheus_source(settings.prometheus, prometheus_url, metric=metric,
                                  query=query, models=wanted), now or WallClock().now())
    store = Store.open_existing(store_url)
    if wanted:  # a misspelt name is refused, not skipped: it would be forecast by no run
        known = set(store.model_names())
        unknown = [m for m in wanted if m not in known]
        if unknown:
            raise InputError(f"--models: model {unknown[0]!r} is not in the store "
                             f"{redact(store_url)}")
    listed = _Only(store, wanted) if wanted else store
    if settings.backend == "kubernetes":
        return (_serves_history(settings.prometheus, metric, query, listed, store),
                now or WallClock().now())
    # the store's observations are on its loop's clock: a simulated fleet's days off the wall's
    return listed, now or now_of(store).at


def wanted_models(models: str | None) -> list[str] | None:
    """``--models``' names, once each in their order (None: every model)."""
    if models is None:
        return None
    return list(dict.fromkeys(m.strip() for m in models.split(",") if m.strip()))


def _serves_history(prometheus: PrometheusSettings, metric: str | None, query: str | None,
                    listed: HistorySource, store: Store) -> HistorySource:
    """What ``serve`` on Kubernetes refreshes from: Prometheus' history of the listed models
    (with ``prometheus.by_engine``, each read by its engine's preset, as the store lists it)."""
    from controlplane.adapters.prometheus import PrometheusHistory, prometheus_source

    if not prometheus.url:
        raise ConfigError("backend: kubernetes: forecast run reads each model's history from "
                          "Prometheus, as serve does: set prometheus.url, or give "
                          "--prometheus-url or --csv")
    engines = {s.name: s.engine.value for s in store.model_specs()}
    return PrometheusHistory(prometheus_source(prometheus, metric=metric, query=query,
                                               engines=lambda: engines), listed.model_names)


class _Only:
    """A store restricted to some models."""

    def __init__(self, store: Store, models: list[str]) -> None:
        self.store, self.models = store, models

    def model_names(self) -> list[str]:
        return [m for m in self.store.model_names() if m in self.models]

    def rate_history(self, model: str, since_at: Any, until_at: Any, step_s: int) -> Any:
        return self.store.rate_history(model, since_at, until_at, step_s)


def _parse_at(text: str) -> Any:
    if text in ("now", "today"):  # pandas reads both as this machine's local time, not UTC
        raise InputError(f"--at {text!r}: not an ISO timestamp (leave --at out to forecast "
                         "from now)")
    try:
        stamp = pd.Timestamp(text)
    except ValueError as exc:
        raise InputError(f"--at {text!r}: not an ISO timestamp") from exc
    if pd.isna(stamp):  # 'NaT', 'nan': pandas' missing time, no origin to forecast from
        raise InputError(f"--at {text!r}: not an ISO timestamp (a missing time)")
    return (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")) \
        .to_pydatetime()
