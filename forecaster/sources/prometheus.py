"""Per-model request rates from Prometheus (prometheus-api-client): history by range queries,
the current rate by one instant query.

Presets: ``triton`` (``nv_inference_request_success`` plus ``nv_inference_request_failure``,
label ``model``: every request that arrived, also those the queue rejected), ``vllm``
(``vllm:request_success_total``, label ``model_name``), ``sglang``
(``sglang:num_requests_total``, label ``model_name``), or any PromQL with a ``{model}``
placeholder (``forecaster.sources.promql`` says why). A history point ``t`` means the step
``[t, t + step)``, as ``TrafficSeries`` and the store's history do: for a preset (or a custom
query with a ``{window}`` placeholder) it is ``rate(metric[W])`` evaluated at ``t + step`` with
``W = max(step, rate_window_s)``, so with the default 120 s window a 600-s step reads the step's
mean rate, not a 2-minute sample at its start; the range query runs from ``since + step`` and
each sample maps back one step. A custom
query without ``{window}`` (a gauge, a recording rule) is sampled at ``t`` itself. Long ranges
are split into chunks below Prometheus' 11,000-points-per-series limit. Samples land on the query
grid; a step without a sample is a gap (NaN), never zero. So is a step whose rate window the
model's samples reach at one end only (before its first sample, at the edge of a scrape gap,
past its newest sample: scrapes that stopped a few minutes ago): Prometheus extrapolates a rate
at most half a scrape interval past the samples, so it reads a fraction of the real rate there,
and the newest such step would be the forecast's level. It is found from the newest sample time
of the series dating the rate (a preset's counter, a custom query's ``sample_series``; without
one, a custom query's steps are taken as read) at every window's start and end, within 1.1
scrape intervals (Prometheus' own threshold; the interval from the samples per window).

Credentials: basic auth in the URL or as ``username``/``password``, or a ``bearer_token``; every
message shows them as ``***``. Failures raise ``SourceError`` naming the URL, model and query:
unreachable or no answer within ``timeout_s`` (``SourceUnreachable``, never retried: a caller
asking model by model stops there; every query also passes ``timeout_s`` to Prometheus, which
then stops evaluating it), rejected query (401/403: the credentials), unexpected response (not
JSON, or not the shape the Prometheus API documents), no data, or no usable value
(``forecaster.prepare.unusable_problem``: every sample NaN, or none positive but some negative).
A history query answered 429 or 5xx is retried up to ``HISTORY_RETRIES`` times, with backoff.
Negative step values are clipped to 0 and NaN/Inf samples are gaps, both counted in
``read_history``'s warnings. The current rate and latency are read by the base class,
``PrometheusCurrent`` (``forecaster.sources.prometheus_current``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

import numpy as np
import requests
from prometheus_api_client.exceptions import PrometheusApiClientException

from forecaster.errors import SourceError
from forecaster.prepare import last_observation_clipped, unusable_problem
from forecaster.sources.prometheus_connection import auth_hint, prometheus_client, unreachable
from forecaster.sources.prometheus_current import PrometheusCurrent
from forecaster.sources.prometheus_replies import matrix_samples, not_api, shape, short
from forecaster.sources.promql import ModelQuery, newest_sample, sample_count
from forecaster.sources.scrape_coverage import PartlyScraped, partly_scraped
from forecaster.types import SourcedSeries, TrafficSeries

MAX_POINTS = 10_000
DEFAULT_RATE_WINDOW_S = 120
HISTORY_RETRIES = 3  # of a range query answered 429 or 5xx (Prometheus overloaded, restarting)


class PrometheusSource(PrometheusCurrent):
    """``HistorySource`` over Prometheus: ``rate_history(model, since, until, step)``, and the
    per-tick ``current_rates(models, at)``."""

    def __init__(self, url: str, preset: str = "triton", query: str | None = None,
                 models: list[str] | None = None,
                 rate_window_s: int = DEFAULT_RATE_WINDOW_S, timeout_s: float = 10.0, *,
                 username: str | None = None, password: str | None = None,
                 bearer_token: str | None = None, tls_verify: bool | str = True,
                 sample_series: str | None = None,
                 model_queries: Mapping[str, ModelQuery] | None = None,
                 engine_presets: Callable[[], Mapping[str, str]] | None = None) -> None:
        super().__init__(url, preset, query, rate_window_s, timeout_s, username=username,
                         password=password, bearer_token=bearer_token, tls_verify=tls_verify,
                         sample_series=sample_series, model_queries=model_queries,
                         engine_presets=engine_presets)
        self.models = models
        self.client = prometheus_client(self.url, timeout_s, username=username,
                                        password=password, bearer_token=bearer_token,
                                        retries=HISTORY_RETRIES, verify=tls_verify)

    def step_end_aligned(self, model: str) -> bool:
        """Whether ``model``'s query is a rate over a window ending where it is evaluated (a
        preset, or a custom query with ``{window}``): then a step's value is read at the step's
        end."""
        template = self.template_for(model)
        return template is None or "{window}" in template

    def model_names(self) -> list[str]:
        """The configured models, else the preset metric's label values (every value of the
        series Prometheus retains: also models gone from the fleet days ago)."""
        return self.model_names_between(None, None)

    def model_names_between(self, since_at: datetime | None,
                            until_at: datetime | None) -> list[str]:
        """The configured models, else the preset metric's label values of the series with
        samples between ``since_at`` and ``until_at`` (None: all it retains), so that a model
        taken out of the fleet before the window is not listed for a forecast without data,
        and the models with their own query. Prometheus answers per block of its storage (two
        hours and more), so a model gone shortly before ``since_at`` may still be listed."""
        if self.models is not None:
            return list(self.models)
        if self.preset is None:
            raise SourceError("a custom PromQL query needs an explicit model list (--models)")
        endpoint = f"{self.shown}/api/v1/label/{self.preset.label}/values"
        params: dict[str, object] = {"match[]": self.preset.metric}
        if since_at is not None and until_at is not None:
            params |= {"start": since_at.timestamp(), "end": until_at.timestamp()}
        try:
            names: object = self.client.get_label_values(self.preset.label, params=params)
        except (requests.JSONDecodeError, KeyError, TypeError) as exc:
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the label query "
                              f"{endpoint} ({self._hide(not_api(exc))})") from exc
        except (requests.RequestException, PrometheusApiClientException) as exc:
            raise SourceError(f"Prometheus at {self.shown} is unreachable or refused the "
                              f"label query: {self._hide(short(exc))}{auth_hint(exc)}") from exc
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the label query "
                              f"{endpoint} (expected a list of names, got {shape(names)})")
        if not names and not self.model_queries:
            window = (f" between {since_at.isoformat()} and {until_at.isoformat()}"
                      if since_at is not None and until_at is not None else "")
            raise SourceError(f"Prometheus at {self.shown} has no series of "
                              f"{self.preset.metric!r}{window}; nothing to forecast")
        return sorted(set(names) | set(self.model_queries))

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        return self.read_history(model, since_at, until_at, step_s).series

    def read_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> SourcedSeries:
        """Values on the grid since_at, since_at + step, ... (< until_at), each the step's mean
        rate (see the module docstring), and what was cleaned: the samples of one step are
        summed (several series), NaN/Inf samples are missing and a negative step value is
        clipped to 0, both counted in the warnings (naming the last observation when it was
        clipped: the forecast then starts from 0). A step whose rate window the model's
        samples cover only in part (``partly_scraped``: after its newest sample, before its
        first, at a scrape gap's edge) is missing too, counted in the warnings: Prometheus'
        rate of such a window is a fraction of the real one. An unusable range
        (``unusable_problem``) raises ``SourceError``, never a zero series."""
        steps = max(0, math.ceil((until_at - since_at).total_seconds() / step_s))
        window_s = max(step_s, self.rate_window_s)
        query = self.query_for(model, window_s)
        aligned = self.step_end_aligned(model)
        shift_s = step_s if aligned else 0
        first_at = since_at + timedelta(seconds=shift_s)
        sums, nonfinite = self._on_grid(model, query, first_at, steps, step_s)
        clipped = sum(1 for v in sums if v < 0)
        problems = [f"{n} {what}" for n, what in ((clipped, "negative value(s) clipped to 0"),
                                                 (nonfinite, "NaN/Inf sample(s) treated as "
                                                             "missing")) if n]
        selector = self._sample_selector(model) if aligned else None
        if selector is not None and any(not math.isnan(v) for v in sums):
            partial = self._partly_scraped(model, selector, sums, first_at, step_s, window_s)
            if partial.dropped:
                sums = [math.nan if i in partial.steps else v for i, v in enumerate(sums)]
                problems.append(partial.describe(window_s))
        last = next((i for i in reversed(range(len(sums))) if not math.isnan(sums[i])), None)
        if clipped and last is not None and sums[last] < 0:  # the forecast starts from it
            problems[0] += ", " + last_observation_clipped(
                sums[last], since_at + timedelta(seconds=step_s * last))
        values = tuple(max(0.0, v) if not math.isnan(v) else v for v in sums)
        window = f"between {since_at.isoformat()} and {until_at.isoformat()}"
        if all(math.isnan(v) for v in sums) and not nonfinite:
            dropped = f"; {problems[-1]}" if problems else ""
            raise SourceError(f"Prometheus at {self.shown} returned no data for model {model!r} "
                              f"{window} (query {query}){dropped}")
        problem = unusable_problem(np.asarray(sums, dtype=np.float64))
        if problem is not None:
            missing = f" ({nonfinite} NaN/Inf sample(s) treated as missing)" if nonfinite else ""
            raise SourceError(f"Prometheus at {self.shown} returned no usable value for model "
                              f"{model!r} {window}: {problem}{missing} (query {query})")
        series = TrafficSeries(series_id=model, step_s=step_s, start_at=since_at, values=values)
        return SourcedSeries(series, tuple(problems))

    def _on_grid(self, model: str, query: str, first_at: datetime, points: int,
                 step_s: int) -> tuple[list[float], int]:
        """``query`` at first_at, first_at + step, ... (``points`` of them, in range queries
        below Prometheus' points limit): the sum of its series' samples at each (NaN: none),
        and how many NaN/Inf samples were left out."""
        sums = [math.nan] * points
        nonfinite = 0
        for lo in range(0, points, MAX_POINTS):
            hi = min(points, lo + MAX_POINTS)
            start = first_at + timedelta(seconds=lo * step_s)
            end = first_at + timedelta(seconds=(hi - 1) * step_s)
            for ts, value in self._range(model, query, start, end, step_s):
                i = round((ts - first_at.timestamp()) / step_s)
                if not 0 <= i < points:
                    continue
                if not math.isfinite(value):
                    nonfinite += 1
                    continue
                sums[i] = value if math.isnan(sums[i]) else sums[i] + value
        return sums, nonfinite

    def _sample_selector(self, model: str) -> str | None:
        """The series whose samples a model's rate rests on: a preset's served-requests
        counter, a custom query's sample series (None without one: not knowable)."""
        if self.template_for(model) is None:
            return self.preset_for(model).selector(model)
        return self.sample_series_for(model)

    def _partly_scraped(self, model: str, selector: str, values: Sequence[float],
                        first_at: datetime, step_s: int, window_s: int) -> PartlyScraped:
        """The steps with a value (``values[i]``, read at first_at + i * step over the
        ``window_s`` before) whose window the samples of ``selector`` do not reach at both
        ends, by two more range queries: the samples per window (the scrape interval) and the
        newest sample time at every window's start and end."""
        steps = len(values)
        counts, _ = self._on_grid(model, sample_count(selector, window_s), first_at, steps,
                                  step_s)
        grid_s = math.gcd(step_s, window_s)
        points = ((steps - 1) * step_s + window_s) // grid_s + 1
        newest, _ = self._on_grid(model, newest_sample(selector, window_s),
                                  first_at - timedelta(seconds=window_s), points, grid_s)
        return partly_scraped(values, counts, newest, first_at.timestamp(), step_s, window_s)

    def _range(self, model: str, query: str, start: datetime, end: datetime,
               step_s: int) -> list[tuple[float, float]]:
        try:
            result: object = self.client.custom_query_range(
                query, start_time=start, end_time=end, step=f"{step_s}s",
                params=self._timeout_param)
        except (requests.JSONDecodeError, KeyError, TypeError) as exc:
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the range "
                              f"query for model {model!r} ({self._hide(not_api(exc))}): "
                              f"{query}") from exc
        except requests.RequestException as exc:
            raise unreachable(exc, self.shown, self.timeout_s, f"; no history for model {model!r}",
                              self._hide) from exc
        except PrometheusApiClientException as exc:
            raise SourceError(f"Prometheus at {self.shown} rejected the query for model "
                              f"{model!r}: {query} ({self._hide(short(exc))})"
                              f"{auth_hint(exc)}") from exc
        try:
            return matrix_samples(result)
        except ValueError as exc:
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the range "
                              f"query for model {model!r} ({exc}): {query}") from exc
