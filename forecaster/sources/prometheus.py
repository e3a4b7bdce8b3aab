"""Per-model request rates from Prometheus (prometheus-api-client): history by range queries,
the current rate by one instant query.

Presets: ``triton`` (``nv_inference_request_success`` plus ``nv_inference_request_failure``,
label ``model``: every request that arrived, also those the queue rejected), ``vllm``
(``vllm:request_success_total``, label ``model_name``), or any PromQL with a ``{model}``
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
``read_history``'s warnings. ``current_rates`` never raises for one model: a model it could not
measure is listed with the reason, so a caller can tell "unknown" from 0; when the preset's
newest-sample-time query fails or misses a measured model, its rates stand without a sample time
and a warning (logger ``headroom.forecaster``) names the models and the error.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import numpy as np
import requests
from prometheus_api_client.exceptions import PrometheusApiClientException

from forecaster.errors import SourceError, SourceUnreachable
from forecaster.prepare import last_observation_clipped, unusable_problem
from forecaster.sources.prometheus_connection import auth_hint, prometheus_client, unreachable
from forecaster.sources.prometheus_replies import (
    matrix_samples,
    not_api,
    shape,
    short,
    shown_url,
    vector_samples,
)
from forecaster.sources.promql import (
    PRESETS,
    escape,
    latency_query,
    newest_sample,
    sample_count,
)
from forecaster.sources.scrape_coverage import PartlyScraped, partly_scraped
from forecaster.types import SourcedSeries, TrafficSeries

MAX_POINTS = 10_000
DEFAULT_RATE_WINDOW_S = 120
HISTORY_RETRIES = 3  # of a range query answered 429 or 5xx (Prometheus overloaded, restarting)
log = logging.getLogger("headroom.forecaster")


@dataclass(frozen=True, slots=True)
class CurrentRates:
    """The request rate of each model measured now, and why the others are unknown."""

    rates: dict[str, float]
    unknown: dict[str, str]  # model -> the reason (credentials shown as ***)
    # model -> unix time of the newest sample its rate rests on (a preset's rates; absent: the
    # query cannot say, the rate is taken as of its evaluation)
    sampled_at: dict[str, float] = field(default_factory=dict)


class PrometheusSource:
    """``HistorySource`` over Prometheus: ``rate_history(model, since, until, step)``, and the
    per-tick ``current_rates(models, at)``."""

    def __init__(self, url: str, preset: str = "triton", query: str | None = None,
                 models: list[str] | None = None,
                 rate_window_s: int = DEFAULT_RATE_WINDOW_S, timeout_s: float = 10.0, *,
                 username: str | None = None, password: str | None = None,
                 bearer_token: str | None = None, tls_verify: bool | str = True,
                 sample_series: str | None = None) -> None:
        if query is None and preset not in PRESETS:
            raise SourceError(f"unknown metric preset {preset!r}; choose one of "
                              f"{', '.join(PRESETS)} or give a PromQL query with {{model}}")
        if query is not None and "{model}" not in query:
            raise SourceError(f"PromQL {query!r} has no {{model}} placeholder")
        if sample_series is not None and (query is None or "{model}" not in sample_series):
            raise SourceError(f"sample series {sample_series!r}: dates a custom query's rates "
                              "and needs one, and a {model} placeholder")
        if rate_window_s < 1:
            raise SourceError(f"rate window {rate_window_s} s: must be at least 1 s")
        self.url = url.rstrip("/")
        self.preset = PRESETS.get(preset)
        self.query_template = query
        #: series selector (with {model}) whose newest sample dates a custom query's rate
        self.sample_series = sample_series
        self.models = models
        self.rate_window_s = rate_window_s
        self.timeout_s = timeout_s
        self.shown = shown_url(self.url)
        self._secrets = tuple(s for s in (urlsplit(self.url).password, password, bearer_token)
                              if s)
        self.client = prometheus_client(self.url, timeout_s, username=username,
                                        password=password, bearer_token=bearer_token,
                                        retries=HISTORY_RETRIES, verify=tls_verify)
        # a tick's query is not retried: the next tick asks again, within its own timeout
        self.live_client = prometheus_client(self.url, timeout_s, username=username,
                                             password=password, bearer_token=bearer_token,
                                             retries=0, verify=tls_verify)
        # Prometheus stops evaluating a query when the client has given up on it
        self._timeout_param = {"timeout": f"{timeout_s:g}"}

    def _hide(self, text: str) -> str:
        """``text`` without a password or token (a requests error may quote the full URL)."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    @property
    def step_end_aligned(self) -> bool:
        """Whether the query is a rate over a window ending where it is evaluated (a preset, or
        a custom query with ``{window}``): then a step's value is read at the step's end."""
        return self.query_template is None or "{window}" in self.query_template

    def query_for(self, model: str, window_s: int | None = None) -> str:
        window = window_s if window_s is not None else self.rate_window_s
        if self.query_template is not None:
            return (self.query_template.replace("{model}", escape(model))
                    .replace("{window}", f"{window}s"))
        assert self.preset is not None
        return self.preset.query(model, window)

    def model_names(self) -> list[str]:
        """The configured models, else the preset metric's label values (every value of the
        series Prometheus retains: also models gone from the fleet days ago)."""
        return self.model_names_between(None, None)

    def model_names_between(self, since_at: datetime | None,
                            until_at: datetime | None) -> list[str]:
        """The configured models, else the preset metric's label values of the series with
        samples between ``since_at`` and ``until_at`` (None: all it retains), so that a model
        taken out of the fleet before the window is not listed for a forecast without data.
        Prometheus answers per block of its storage (two hours and more), so a model gone
        shortly before ``since_at`` may still be listed."""
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
        if not names:
            window = (f" between {since_at.isoformat()} and {until_at.isoformat()}"
                      if since_at is not None and until_at is not None else "")
            raise SourceError(f"Prometheus at {self.shown} has no series of "
                              f"{self.preset.metric!r}{window}; nothing to forecast")
        return sorted(names)

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
        shift_s = step_s if self.step_end_aligned else 0
        first_at = since_at + timedelta(seconds=shift_s)
        sums, nonfinite = self._on_grid(model, query, first_at, steps, step_s)
        clipped = sum(1 for v in sums if v < 0)
        problems = [f"{n} {what}" for n, what in ((clipped, "negative value(s) clipped to 0"),
                                                 (nonfinite, "NaN/Inf sample(s) treated as "
                                                             "missing")) if n]
        selector = self._sample_selector(model) if self.step_end_aligned else None
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
        counter, a custom query's ``sample_series`` (None without one: not knowable)."""
        if self.query_template is None:
            assert self.preset is not None
            return self.preset.selector(model)
        if self.sample_series is None:
            return None
        return self.sample_series.replace("{model}", escape(model))

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

    def current_rates(self, models: Sequence[str], at: datetime) -> CurrentRates:
        """Each model's request rate over the last ``rate_window_s`` before ``at``: one grouped
        query for a preset, one query per model for custom PromQL (after a failure to reach
        Prometheus the rest are not asked: each request waits up to ``timeout_s``). A model
        with no series, or a non-finite value, is unknown, never 0. A preset's rates also say
        when their newest sample was taken (a scrape that stopped leaves a rate over a long
        window that is that old); a custom query's do only with ``sample_series`` (one more
        query per model: PromQL cannot tell which series an arbitrary expression rests on, the
        operator names them)."""
        if self.preset is not None and self.query_template is None:
            got = self._current_grouped(models, at, self.preset.grouped(self.rate_window_s),
                                        self.preset.label)
            try:
                newest = self._instant(self.preset.newest_sample(self.rate_window_s), at,
                                       self.preset.label) if got.rates else {}
            except SourceError as exc:  # the rates stand; their age is not known
                log.warning("Prometheus at %s: the newest-sample-time query failed; the rates "
                            "of %d model(s) (%s) are taken as of %s: %s", self.shown,
                            len(got.rates), ", ".join(sorted(got.rates)), at.isoformat(), exc)
                return got
            undated = sorted(set(got.rates) - set(newest))
            if undated:
                log.warning("Prometheus at %s: the newest-sample-time query named no sample "
                            "for %d measured model(s) (%s); their rates are taken as of %s",
                            self.shown, len(undated), ", ".join(undated), at.isoformat())
            return replace(got, sampled_at={m: t for m, t in newest.items() if m in got.rates})
        got = self._current_each(models, at, self.query_for)
        return self._dated_each(got, at) if self.sample_series is not None else got

    def _dated_each(self, got: CurrentRates, at: datetime) -> CurrentRates:
        """``got`` with each rate's newest sample time from ``sample_series``; a model whose
        series has no sample (or a failed query) keeps its rate undated, logged."""
        assert self.sample_series is not None
        newest: dict[str, float] = {}
        for model in sorted(got.rates):
            query = newest_sample(self.sample_series.replace("{model}", escape(model)),
                                  self.rate_window_s)
            try:
                found = self._instant(query, at, None)
            except SourceError as exc:  # the rates stand; their age is not known
                log.warning("Prometheus at %s: the newest-sample-time query of %r failed; its "
                            "rate is taken as of %s: %s", self.shown, model, at.isoformat(), exc)
                if isinstance(exc, SourceUnreachable):
                    break
                continue
            if "" in found and math.isfinite(found[""]):
                newest[model] = found[""]
            else:
                log.warning("Prometheus at %s: prometheus.query_sample_series named no sample "
                            "for model %r (query %s); its rate is taken as of %s", self.shown,
                            model, query, at.isoformat())
        return replace(got, sampled_at=newest)

    def current_latencies_ms(self, models: Sequence[str], at: datetime, preset: str,
                             template: str | None = None,
                             quantile: float | None = None) -> CurrentRates:
        """Each model's request latency (ms) over the last ``rate_window_s`` before ``at``, the
        mean or the ``quantile``: one grouped query for the engine's ``preset``
        (``latency_query``), or one query per model of ``template`` (PromQL with ``{model}``,
        optionally ``{window}``; it decides the statistic). A model without requests in the
        window (0 / 0, or a histogram with no observations: NaN), or with no series, is
        unknown."""
        if template is None:
            if preset not in PRESETS:
                raise SourceError(f"unknown metric preset {preset!r} for latency")
            return self._current_grouped(models, at,
                                         latency_query(preset, self.rate_window_s, quantile),
                                         PRESETS[preset].label)
        return self._current_each(models, at, lambda model: template.replace(
            "{model}", escape(model)).replace("{window}", f"{self.rate_window_s}s"))

    def _current_grouped(self, models: Sequence[str], at: datetime, query: str,
                         label: str) -> CurrentRates:
        rates: dict[str, float] = {}
        unknown: dict[str, str] = {}
        try:
            by_label = self._instant(query, at, label)
        except SourceError as exc:
            return CurrentRates({}, {model: str(exc) for model in models})
        for model in models:
            rates_or_why(model, by_label.get(model), query, self.shown, rates, unknown)
        return CurrentRates(rates, unknown)

    def _current_each(self, models: Sequence[str], at: datetime,
                      query_for: Callable[[str], str]) -> CurrentRates:
        rates: dict[str, float] = {}
        unknown: dict[str, str] = {}
        down: SourceUnreachable | None = None
        for model in models:
            if down is not None:
                unknown[model] = down.not_asked()
                continue
            query = query_for(model)
            try:
                found = self._instant(query, at, None)
            except SourceError as exc:
                unknown[model] = str(exc)
                if isinstance(exc, SourceUnreachable):
                    down = exc
                continue
            rates_or_why(model, found.get(""), query, self.shown, rates, unknown)
        return CurrentRates(rates, unknown)

    def _instant(self, query: str, at: datetime, label: str | None) -> dict[str, float]:
        """label value -> the sum of its series' values at ``at`` (key "" when ``label`` is
        None: every series summed)."""
        try:
            result: object = self.live_client.custom_query(
                query, params={"time": at.timestamp(), **self._timeout_param})
        except (requests.JSONDecodeError, KeyError, TypeError) as exc:
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the instant "
                              f"query ({self._hide(not_api(exc))}): {query}") from exc
        except requests.RequestException as exc:
            raise unreachable(exc, self.shown, self.timeout_s, "", self._hide) from exc
        except PrometheusApiClientException as exc:
            raise SourceError(f"Prometheus at {self.shown} rejected the query {query} "
                              f"({self._hide(short(exc))}){auth_hint(exc)}") from exc
        try:
            samples = vector_samples(result, label)
        except ValueError as exc:
            raise SourceError(f"Prometheus at {self.shown}: unexpected response to the instant "
                              f"query ({exc}): {query}") from exc
        out: dict[str, float] = {}
        for key, value in samples:
            out[key] = out.get(key, 0.0) + value
        return out

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


def rates_or_why(model: str, value: float | None, query: str, shown: str,
                 rates: dict[str, float], unknown: dict[str, str]) -> None:
    """File ``model``'s measured ``value`` under ``rates``, or why it is unknown."""
    if value is None:
        unknown[model] = f"Prometheus at {shown} returned no series for model {model!r} " \
                         f"(query {query})"
    elif not math.isfinite(value):
        unknown[model] = f"Prometheus at {shown} returned {value} for model {model!r} " \
                         f"(query {query})"
    else:
        rates[model] = max(0.0, value)
