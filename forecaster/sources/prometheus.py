"""Per-model request rates from Prometheus range queries (prometheus-api-client).

Presets: ``triton`` (``nv_inference_request_success``, label ``model``), ``vllm``
(``vllm:request_success_total``, label ``model_name``), or any PromQL with a ``{model}``
placeholder. Long ranges are split into chunks below Prometheus' 11,000-points-per-series
limit. Samples land on the query grid; a step without a sample is a gap (NaN), never zero.
Failures raise ``SourceError`` naming the URL (a basic-auth password in it as ``***``), model
and query: unreachable, rejected query, unexpected response (not JSON, or not the shape the
Prometheus API documents), no data, or no usable value (``forecaster.prepare.unusable_problem``:
every sample NaN, or none positive but some negative). Negative step values are clipped to 0 and
NaN/Inf samples are gaps, both counted in ``read_history``'s warnings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException

from forecaster.errors import SourceError
from forecaster.prepare import unusable_problem
from forecaster.types import SourcedSeries, TrafficSeries

MAX_POINTS = 10_000


@dataclass(frozen=True, slots=True)
class Preset:
    metric: str
    label: str

    def query(self, model: str, window: str) -> str:
        return f'sum(rate({self.metric}{{{self.label}="{escape(model)}"}}[{window}]))'


PRESETS = {
    "triton": Preset("nv_inference_request_success", "model"),
    "vllm": Preset("vllm:request_success_total", "model_name"),
}


def escape(value: str) -> str:
    """A PromQL double-quoted label value."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class PrometheusSource:
    """``HistorySource`` over Prometheus: ``rate_history(model, since, until, step)``."""

    def __init__(self, url: str, preset: str = "triton", query: str | None = None,
                 models: list[str] | None = None, rate_window: str = "2m",
                 timeout_s: float = 10.0) -> None:
        if query is None and preset not in PRESETS:
            raise SourceError(f"unknown metric preset {preset!r}; choose one of "
                              f"{', '.join(PRESETS)} or give a PromQL query with {{model}}")
        if query is not None and "{model}" not in query:
            raise SourceError(f"PromQL {query!r} has no {{model}} placeholder")
        self.url = url.rstrip("/")
        self.preset = PRESETS.get(preset)
        self.query_template = query
        self.models = models
        self.rate_window = rate_window
        self.timeout_s = timeout_s
        self.client = PrometheusConnect(url=self.url, disable_ssl=True, timeout=int(timeout_s))
        self.shown = shown_url(self.url)
        self._password = urlsplit(self.url).password or ""

    def _hide(self, text: str) -> str:
        """``text`` without the URL's password (a requests error may quote the full URL)."""
        if not self._password:
            return text
        return text.replace(f":{self._password}@", ":***@")

    def query_for(self, model: str) -> str:
        if self.query_template is not None:
            return self.query_template.replace("{model}", escape(model))
        assert self.preset is not None
        return self.preset.query(model, self.rate_window)

    def model_names(self) -> list[str]:
        """The configured models, else the preset metric's label values."""
        if self.models is not None:
            return list(self.models)
        if self.preset is None:
            raise SourceError("a custom PromQL query needs an explicit model list (--models)")
        endpoint = f"{self.shown}/api/v1/label/{self.preset.label}/values"
        try:
            names: object = self.client.get_label_values(self.preset.label,
                                                         params={"match[]": self.preset.metric})
        except (requests.JSONDecodeError, KeyError, TypeError) as exc:
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the label query "
                              f"{endpoint} ({self._hide(_not_api(exc))})") from exc
        except (requests.RequestException, PrometheusApiClientException) as exc:
            raise SourceError(f"Prometheus at {self.shown} is unreachable or refused the "
                              f"label query: {self._hide(_short(exc))}") from exc
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the label query "
                              f"{endpoint} (expected a list of names, got {_shape(names)})")
        if not names:
            raise SourceError(f"Prometheus at {self.shown} has no series of "
                              f"{self.preset.metric!r}; nothing to forecast")
        return sorted(names)

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        return self.read_history(model, since_at, until_at, step_s).series

    def read_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> SourcedSeries:
        """Values on the grid since_at, since_at + step, ... (< until_at) and what was cleaned:
        the samples of one step are summed (several series), NaN/Inf samples are missing and a
        negative step value is clipped to 0, both counted in the warnings. An unusable range
        (``unusable_problem``) raises ``SourceError``, never a zero series."""
        steps = max(0, math.ceil((until_at - since_at).total_seconds() / step_s))
        sums = [math.nan] * steps
        query = self.query_for(model)
        nonfinite = 0
        for lo in range(0, steps, MAX_POINTS):
            hi = min(steps, lo + MAX_POINTS)
            start = since_at + timedelta(seconds=lo * step_s)
            end = since_at + timedelta(seconds=(hi - 1) * step_s)
            for ts, value in self._range(model, query, start, end, step_s):
                i = round((ts - since_at.timestamp()) / step_s)
                if not 0 <= i < steps:
                    continue
                if not math.isfinite(value):
                    nonfinite += 1
                    continue
                sums[i] = value if math.isnan(sums[i]) else sums[i] + value
        clipped = sum(1 for v in sums if v < 0)
        values = tuple(max(0.0, v) if not math.isnan(v) else v for v in sums)
        problems = [f"{n} {what}" for n, what in ((clipped, "negative value(s) clipped to 0"),
                                                 (nonfinite, "NaN/Inf sample(s) treated as "
                                                             "missing")) if n]
        window = f"between {since_at.isoformat()} and {until_at.isoformat()}"
        if all(math.isnan(v) for v in sums) and not nonfinite:
            raise SourceError(f"Prometheus at {self.shown} returned no data for model {model!r} "
                              f"{window} (query {query})")
        problem = unusable_problem(np.asarray(sums, dtype=np.float64))
        if problem is not None:
            missing = f" ({nonfinite} NaN/Inf sample(s) treated as missing)" if nonfinite else ""
            raise SourceError(f"Prometheus at {self.shown} returned no usable value for model "
                              f"{model!r} {window}: {problem}{missing} (query {query})")
        series = TrafficSeries(series_id=model, step_s=step_s, start_at=since_at, values=values)
        return SourcedSeries(series, tuple(problems))

    def _range(self, model: str, query: str, start: datetime, end: datetime,
               step_s: int) -> list[tuple[float, float]]:
        try:
            result: object = self.client.custom_query_range(query, start_time=start,
                                                            end_time=end, step=f"{step_s}s")
        except (requests.JSONDecodeError, KeyError, TypeError) as exc:
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the range "
                              f"query for model {model!r} ({self._hide(_not_api(exc))}): "
                              f"{query}") from exc
        except requests.RequestException as exc:
            raise SourceError(f"Prometheus at {self.shown} is unreachable "
                              f"({self._hide(_short(exc))}); no history for model "
                              f"{model!r}") from exc
        except PrometheusApiClientException as exc:
            raise SourceError(f"Prometheus at {self.shown} rejected the query for model "
                              f"{model!r}: {query} ({self._hide(_short(exc))})") from exc
        try:
            return matrix_samples(result)
        except ValueError as exc:
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the range "
                              f"query for model {model!r} ({exc}): {query}") from exc


def shown_url(url: str) -> str:
    """``url`` with its password as ``***`` (basic auth in the URL), for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def matrix_samples(result: object) -> list[tuple[float, float]]:
    """(unix seconds, value) of every sample of a range query's ``data.result`` (a list of
    ``{"metric": ..., "values": [[ts, "value"], ...]}``); ``"NaN"``/``"+Inf"`` stay non-finite.
    Anything else raises ``ValueError`` saying what was wrong."""
    if result is None:
        return []
    if not isinstance(result, list):
        raise ValueError(f"result is {_shape(result)}, expected a list of series")
    out: list[tuple[float, float]] = []
    for series in result:
        if not isinstance(series, dict):
            raise ValueError(f"a series is {_shape(series)}, expected an object")
        values = series.get("values", [])
        if not isinstance(values, list):
            raise ValueError(f"a series' values are {_shape(values)}, expected a list of "
                             "[time, value] pairs")
        for point in values:
            if not isinstance(point, list | tuple) or len(point) != 2:
                raise ValueError(f"sample {_clip(point)} is not a [time, value] pair")
            ts, raw = point
            try:
                out.append((float(ts), float(raw)))
            except (TypeError, ValueError):
                raise ValueError(f"sample {_clip(point)} is not a number") from None
    return out


def _not_api(exc: Exception) -> str:
    if isinstance(exc, requests.JSONDecodeError):
        return f"not JSON: {_short(exc)}"
    return f"not a Prometheus API reply: {type(exc).__name__} {_short(exc)}"


def _shape(value: object) -> str:
    kinds = {dict: "a JSON object", list: "a JSON list", str: "a string", type(None): "null"}
    return f"{kinds.get(type(value), type(value).__name__)} {_clip(value)}"


def _clip(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]
