"""A Prometheus source's reads of now: ``PrometheusCurrent``, the base of ``PrometheusSource``
(``forecaster.sources.prometheus``), owns the connection and query settings and reads each
model's current rate (``current_rates``) and latency (``current_latencies_ms``) by instant
queries; its queries are not retried (the next tick asks again, within its own timeout).

``current_rates`` never raises for one model: a model it could not measure is listed with the
reason, so a caller can tell "unknown" from 0; when the preset's newest-sample-time query fails
or misses a measured model, its rates stand without a sample time and a warning (logger
``headroom.forecaster``) names the models and the error.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from urllib.parse import urlsplit

import requests
from prometheus_api_client.exceptions import PrometheusApiClientException

from forecaster.errors import SourceError, SourceUnreachable
from forecaster.sources.prometheus_connection import auth_hint, prometheus_client, unreachable
from forecaster.sources.prometheus_replies import not_api, short, shown_url, vector_samples
from forecaster.sources.promql import (
    PRESETS,
    ModelQuery,
    Preset,
    escape,
    kv_cache_query,
    latency_query,
    newest_sample,
    queue_query,
)

log = logging.getLogger("headroom.forecaster")


@dataclass(frozen=True, slots=True)
class CurrentRates:
    """The request rate of each model measured now, and why the others are unknown."""

    rates: dict[str, float]
    unknown: dict[str, str]  # model -> the reason (credentials shown as ***)
    # model -> unix time of the newest sample its rate rests on (a preset's rates; absent: the
    # query cannot say, the rate is taken as of its evaluation)
    sampled_at: dict[str, float] = field(default_factory=dict)
    #: the source could not be reached (or did not answer in time) when it was asked: this
    #: error, after which the same tick's other reads are not asked (each would wait as long)
    unreachable: SourceUnreachable | None = None


class PrometheusCurrent:
    """What every read of a Prometheus source rests on (the URL, the preset or custom query,
    credentials hidden from messages), and the per-tick instant reads: ``current_rates``,
    ``current_latencies_ms``, ``current_queued`` and ``current_kv_cache_usage``."""

    def __init__(self, url: str, preset: str, query: str | None, rate_window_s: int,
                 timeout_s: float, *, username: str | None, password: str | None,
                 bearer_token: str | None, tls_verify: bool | str,
                 sample_series: str | None,
                 model_queries: Mapping[str, ModelQuery] | None = None,
                 engine_presets: Callable[[], Mapping[str, str]] | None = None) -> None:
        """``engine_presets``: what gives, at each read, the preset of each model that is read
        by its engine's (the models file's ``engine``) rather than by ``preset``."""
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
        self._engine_presets = engine_presets or dict
        self.query_template = query
        #: series selector (with {model}) whose newest sample dates a custom query's rate
        self.sample_series = sample_series
        #: models read by their own query (``ModelQuery``), not the preset or the shared one
        self.model_queries: dict[str, ModelQuery] = dict(model_queries or {})
        self.rate_window_s = rate_window_s
        self.timeout_s = timeout_s
        self.shown = shown_url(self.url)
        self._secrets = tuple(s for s in (urlsplit(self.url).password, password, bearer_token)
                              if s)
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

    def template_for(self, model: str) -> str | None:
        """The custom PromQL that reads ``model``'s rate: its own, else the shared custom query;
        None: the preset's."""
        own = self.model_queries.get(model)
        return own.query if own is not None else self.query_template

    def sample_series_for(self, model: str) -> str | None:
        """The series selector (``{model}`` filled in) whose newest sample dates ``model``'s
        custom-query rate; None: a preset's rate (dated by its own counter) or not knowable."""
        own = self.model_queries.get(model)
        series = own.sample_series if own is not None else self.sample_series
        return None if series is None else series.replace("{model}", escape(model))

    def engine_presets(self) -> dict[str, str]:
        """The models read by their engine's preset (the source reads models by their
        engines', and the engine has one) and that preset's name; the others by the source's."""
        return {m: name for m, name in self._engine_presets().items() if name in PRESETS}

    def preset_for(self, model: str, engines: Mapping[str, str] | None = None) -> Preset:
        """The preset that reads ``model``'s rate when no custom query does (``engines``:
        ``engine_presets()``, read once for many models)."""
        name = (self.engine_presets() if engines is None else engines).get(model, "")
        preset = PRESETS.get(name, self.preset)
        assert preset is not None
        return preset

    def query_for(self, model: str, window_s: int | None = None) -> str:
        window = window_s if window_s is not None else self.rate_window_s
        template = self.template_for(model)
        if template is not None:
            return template.replace("{model}", escape(model)).replace("{window}", f"{window}s")
        return self.preset_for(model).arrivals(model, window)

    def current_rates(self, models: Sequence[str], at: datetime) -> CurrentRates:
        """Each model's request rate over the last ``rate_window_s`` before ``at``: one grouped
        query for a preset, one query per model for custom PromQL (after a failure to reach
        Prometheus the rest are not asked: each request waits up to ``timeout_s``). A model
        with no series, or a non-finite value, is unknown, never 0. A preset's rates also say
        when their newest sample was taken (a scrape that stopped leaves a rate over a long
        window that is that old); a custom query's do only with ``sample_series`` (one more
        query per model: PromQL cannot tell which series an arbitrary expression rests on, the
        operator names them). A model with its own query (``model_queries``) is read by it,
        one query per model, whatever the others are read by; the others by one grouped query
        per preset (their engines', ``engine_presets``, or the source's)."""
        own = [m for m in models if self.template_for(m) is not None]
        got = self._dated_each(self._current_each(own, at, self.query_for), at)
        for preset, grouped in self._by_preset([m for m in models if m not in own]).items():
            if got.unreachable is not None:
                got = replace(got, unknown=got.unknown | {
                    m: got.unreachable.not_asked() for m in grouped})
                continue
            shared = self._current_grouped(grouped, at, preset.grouped(self.rate_window_s),
                                           preset.label)
            got = CurrentRates(got.rates | shared.rates, got.unknown | shared.unknown,
                               got.sampled_at | self._dated_grouped(preset, shared, at),
                               shared.unreachable)
        return got

    def _by_preset(self, models: Sequence[str]) -> dict[Preset, list[str]]:
        """``models`` grouped by the preset that reads them (``preset_for``), in order."""
        engines = self.engine_presets()
        groups: dict[Preset, list[str]] = {}
        for model in models:
            groups.setdefault(self.preset_for(model, engines), []).append(model)
        return groups

    def _dated_grouped(self, preset: Preset, got: CurrentRates, at: datetime
                       ) -> dict[str, float]:
        """The newest sample time behind each of ``preset``'s rates ``got`` (by one grouped
        query); the rates it cannot date stand undated, logged."""
        try:
            newest = self._instant(preset.newest_sample(self.rate_window_s), at,
                                   preset.label) if got.rates else {}
        except SourceError as exc:  # the rates stand; their age is not known
            log.warning("Prometheus at %s: the newest-sample-time query failed; the rates "
                        "of %d model(s) (%s) are taken as of %s: %s", self.shown,
                        len(got.rates), ", ".join(sorted(got.rates)), at.isoformat(), exc)
            return {}
        undated = sorted(set(got.rates) - set(newest))
        if undated:
            log.warning("Prometheus at %s: the newest-sample-time query named no sample "
                        "for %d measured model(s) (%s); their rates are taken as of %s",
                        self.shown, len(undated), ", ".join(undated), at.isoformat())
        return {m: t for m, t in newest.items() if m in got.rates}

    def _dated_each(self, got: CurrentRates, at: datetime) -> CurrentRates:
        """``got`` with the newest sample time of each rate whose custom query has a sample
        series (``sample_series_for``); a model whose series has no sample (or a failed query)
        keeps its rate undated, logged."""
        newest: dict[str, float] = {}
        for model in sorted(got.rates):
            series = self.sample_series_for(model)
            if series is None:
                continue
            query = newest_sample(series, self.rate_window_s)
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
                setting = (f"prometheus.model_queries.{model}.sample_series"
                           if model in self.model_queries else "prometheus.query_sample_series")
                log.warning("Prometheus at %s: %s named no sample for model %r (query %s); "
                            "its rate is taken as of %s", self.shown, setting, model, query,
                            at.isoformat())
        return replace(got, sampled_at=newest)

    def current_latencies_ms(self, models: Sequence[str], at: datetime, preset: str,
                             template: str | None = None,
                             quantile: float | None = None, timed: str = "e2e") -> CurrentRates:
        """Each model's request latency (ms) over the last ``rate_window_s`` before ``at``, the
        mean or the ``quantile`` of what ``timed`` names (e2e, ttft): one grouped query for the
        engine's ``preset`` (``latency_query``), or one query per model of ``template`` (PromQL
        with ``{model}``, optionally ``{window}``; it decides the statistic). A model without
        requests in the window (0 / 0, or a histogram with no observations: NaN), or with no
        series, is unknown."""
        if template is None:
            if preset not in PRESETS:
                raise SourceError(f"unknown metric preset {preset!r} for latency")
            return self._current_grouped(models, at,
                                         latency_query(preset, self.rate_window_s, quantile,
                                                       timed),
                                         PRESETS[preset].label)
        return self._current_each(models, at, lambda model: template.replace(
            "{model}", escape(model)).replace("{window}", f"{self.rate_window_s}s"))

    def current_queued(self, models: Sequence[str], at: datetime, preset: str,
                       growth: bool = False) -> CurrentRates:
        """Each model's requests waiting at ``at``, summed over its replicas, or (``growth``)
        how fast the requests they hold (queued and running) grew over the last
        ``rate_window_s`` (requests/s, negative while they drain): one grouped query of the
        engine's ``preset`` gauges (``queue_query``). A model with no series (an engine that
        does not export them) is unknown."""
        query = queue_query(preset, self.rate_window_s if growth else None)
        return self._current_grouped(models, at, query, PRESETS[preset].label,
                                     least=-math.inf if growth else 0.0)

    def current_kv_cache_usage(self, models: Sequence[str], at: datetime,
                               preset: str) -> CurrentRates:
        """Each model's KV cache usage at ``at`` (0-1, the mean over its replicas): one grouped
        query (``kv_cache_query``); a model with no series is unknown."""
        return self._current_grouped(models, at, kv_cache_query(preset), PRESETS[preset].label)

    def _current_grouped(self, models: Sequence[str], at: datetime, query: str,
                         label: str, least: float = 0.0) -> CurrentRates:
        rates: dict[str, float] = {}
        unknown: dict[str, str] = {}
        try:
            by_label = self._instant(query, at, label)
        except SourceError as exc:
            return CurrentRates({}, {model: str(exc) for model in models},
                                unreachable=exc if isinstance(exc, SourceUnreachable) else None)
        for model in models:
            rates_or_why(model, by_label.get(model), query, self.shown, rates, unknown, least)
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
        return CurrentRates(rates, unknown, unreachable=down)

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


def rates_or_why(model: str, value: float | None, query: str, shown: str,
                 rates: dict[str, float], unknown: dict[str, str], least: float = 0.0) -> None:
    """File ``model``'s measured ``value`` (at least ``least``) under ``rates``, or why it is
    unknown."""
    if value is None:
        unknown[model] = f"Prometheus at {shown} returned no series for model {model!r} " \
                         f"(query {query})"
    elif not math.isfinite(value):
        unknown[model] = f"Prometheus at {shown} returned {value} for model {model!r} " \
                         f"(query {query})"
    else:
        rates[model] = max(least, value)
