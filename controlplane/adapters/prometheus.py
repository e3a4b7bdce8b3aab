"""Prometheus for ``headroom serve`` with ``backend: kubernetes``: each model's request rate
every tick (``PrometheusLoad``, the reader's ``LoadSource``) and the stored models' history for
the forecast refresh (``PrometheusHistory``), through the one client that settings
``prometheus`` describe (``headroom forecast run --prometheus-url`` builds it the same way)."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from controlplane.domain.models import ModelSpec, RpsByModel, live_rps
from controlplane.domain.observed import ModelLoad
from controlplane.settings import ConfigError
from controlplane.settings_cluster import PrometheusSettings
from forecaster.errors import SourceError
from forecaster.sources.prometheus import PrometheusSource
from forecaster.sources.prometheus_current import CurrentRates
from forecaster.sources.promql import KV_CACHE_GAUGES, LATENCY_HISTOGRAMS, ModelQuery
from forecaster.types import SourcedSeries, TrafficSeries

log = logging.getLogger("headroom.prometheus")


def read_bearer_token(path: Path) -> str:
    """The token in ``path`` (surrounding whitespace dropped); a ConfigError naming the file
    and the setting, never the token, when it is missing, unreadable or empty."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else \
            type(error).__name__
        raise ConfigError(f"prometheus.bearer_token_file {path}: cannot read it "
                          f"({reason})") from None
    if not token:
        raise ConfigError(f"prometheus.bearer_token_file {path}: the file is empty")
    return token


def tls_verify(settings: PrometheusSettings) -> bool | str:
    """How an https Prometheus is verified: against ``prometheus.ca_file`` (checked to hold a
    PEM certificate now: a ConfigError naming the setting otherwise), not at all with
    ``prometheus.insecure_skip_verify``, else against the system's CAs."""
    if settings.ca_file is None:
        return not settings.insecure_skip_verify
    path = settings.ca_file
    try:
        ssl.create_default_context(cafile=str(path))
    except FileNotFoundError:
        raise ConfigError(f"prometheus.ca_file {path}: no such file") from None
    except (OSError, ssl.SSLError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ConfigError(f"prometheus.ca_file {path}: not a PEM CA bundle ({reason})") from None
    return str(path)


def prometheus_source(settings: PrometheusSettings, url: str | None = None, *,
                      metric: str | None = None, query: str | None = None,
                      models: list[str] | None = None,
                      engines: Callable[[], Mapping[str, str]] | None = None
                      ) -> PrometheusSource:
    """A source on ``url`` (default ``prometheus.url``) with the settings' credentials, rate
    window and timeout; ``metric``/``query`` override the settings' preset and PromQL. With
    ``prometheus.by_engine``, ``engines`` gives each model's engine (the models file's), whose
    preset reads it. The bearer token file is read here, once. Bad settings are a ConfigError
    naming them."""
    target = url or settings.url
    if not target:
        raise ConfigError("prometheus.url is not set")
    token = (read_bearer_token(settings.bearer_token_file)
             if settings.bearer_token_file is not None else None)
    try:
        return PrometheusSource(
            target, metric or settings.metric, query if query is not None else settings.query,
            models, settings.rate_window_s, settings.timeout_s, username=settings.username,
            password=settings.password.get_secret_value() if settings.password else None,
            bearer_token=token, tls_verify=tls_verify(settings),
            # the settings' series dates the settings' query, not one given in its place
            sample_series=settings.query_sample_series if query is None else None,
            model_queries=model_queries(settings),
            engine_presets=engines if settings.by_engine and query is None else None)
    except SourceError as error:
        raise ConfigError(f"prometheus: {error}") from None


def model_queries(settings: PrometheusSettings) -> dict[str, ModelQuery]:
    """``prometheus.model_queries`` as the source reads them (kept also where a command gives
    its own ``--metric``/``--query``: they name single models)."""
    return {model: ModelQuery(own.query, own.sample_series)
            for model, own in settings.model_queries.items()}


def unmatched_model_queries(settings: PrometheusSettings, models: Iterable[str]) -> list[str]:
    """The ``prometheus.model_queries`` entries of models not in ``models`` (the models file's),
    sorted: a misspelt name leaves that model on the preset's requests while its profile is in
    its own query's unit (tokens, say)."""
    return sorted(set(settings.model_queries) - set(models))


def per_replica_rps(specs: Sequence[ModelSpec]) -> dict[str, float]:
    """What one replica of each model serves: its best profile point's ``replica_rps`` (one MPS
    process's part of a segment shared by MPS), as the live sizing and the simulated fleet
    count capacity."""
    return {s.name: s.best_point().replica_rps for s in specs}


SHARED_UNDATED = ("the custom prometheus.query carries no sample time (set "
                  "prometheus.query_sample_series)")
OWN_UNDATED = ("the model's own query in prometheus.model_queries carries no sample time (set "
               "its sample_series)")


class PrometheusLoad:
    """``LoadSource``: demand = the model's measured request rate, capacity = ready replicas x
    its per-replica throughput, its request latency (``latency_preset``'s grouped query: the
    mean, or ``latency_quantile`` of the engine's histogram of ``latency_timed``, e2e or ttft;
    or ``latency_query`` per model), the requests waiting in its replicas' queues
    (``queue_preset``) and its KV cache usage (``kv_cache_preset``); with the source's engine
    presets (``prometheus.by_engine``) each model's engine names the preset instead. A model
    Prometheus could not measure is unknown, not 0; a latency, queue or KV cache it could not
    read is None (logged) and never fails the load reading."""

    def __init__(self, source: PrometheusSource,
                 replica_rps: RpsByModel,
                 latency_preset: str = "triton", latency_query: str | None = None,
                 latency_quantile: float | None = None,
                 queue_preset: str | None = None,
                 kv_cache_preset: str | None = None, latency_timed: str = "e2e") -> None:
        """``replica_rps``: each model's per-replica throughput, or what gives the current
        one at each reading (``serve``'s models in use, reloaded without a restart);
        ``queue_preset``: the engine whose waiting-requests gauge is read each tick
        (``QUEUE_GAUGES``), None: no queue read; ``kv_cache_preset``: the engine whose KV
        cache usage is read each tick (``KV_CACHE_GAUGES``: vllm), None: not read."""
        self.source = source
        self._replica_rps = live_rps(replica_rps)
        self.latency_preset = latency_preset
        self.latency_query = latency_query
        self.latency_quantile = latency_quantile
        self.latency_timed = latency_timed
        self.queue_preset = queue_preset
        self.kv_cache_preset = kv_cache_preset
        #: by reading (queue, its growth, KV cache), the models it was last unmeasured for:
        #: warned when a model's becomes unmeasured, not every tick while it stays so
        self._unmeasured: dict[str, frozenset[str]] = {}
        if source.query_template is not None and source.sample_series is None:
            log.warning("load.undated", extra={"why": SHARED_UNDATED})
        own_undated = sorted(m for m in source.model_queries if self.undated_why(m))
        if own_undated:
            log.warning("load.undated", extra={"models": own_undated, "why": OWN_UNDATED})

    def undated_why(self, model: str) -> str:
        """Why ``model``'s rate carries no sample time ("" when it does: a preset's, or a
        custom query's with a sample series), so staleness cannot be checked for it."""
        if self.source.template_for(model) is None or \
                self.source.sample_series_for(model) is not None:
            return ""
        return OWN_UNDATED if model in self.source.model_queries else SHARED_UNDATED

    def measure(self, ready_replicas: Mapping[str, int], at: datetime) -> dict[str, ModelLoad]:
        models = sorted(ready_replicas)
        rates = self.source.current_rates(models, at)
        if rates.unknown:
            log.warning("load.unmeasured", extra={"models": sorted(rates.unknown),
                                                  "error": next(iter(rates.unknown.values()))})
        # a Prometheus the rates could not reach is not asked again this tick: each read would
        # wait out the timeout as well, and the tick with it
        asked = [] if rates.unreachable is not None else models
        latencies = self._latencies_ms(asked, at)
        # a model read by its own query may count tokens, not requests: its queue is not read
        queued = self._queued([m for m in asked if m not in self.source.model_queries], at)
        growth = self._queued(sorted(queued), at, growth=True)  # of the queues read
        kv_cache = self._kv_cache_usage(asked, at)
        sampled_at = {m: datetime.fromtimestamp(t, UTC) for m, t in rates.sampled_at.items()}
        replica_rps = self.replica_rps
        return {model: ModelLoad(rates.rates.get(model),
                                 ready * replica_rps.get(model, 0.0),
                                 rates.unknown.get(model, ""),
                                 latency_ms=latencies.get(model),
                                 queued_requests=queued.get(model),
                                 queue_growth_rps=growth.get(model),
                                 kv_cache_usage=kv_cache.get(model),
                                 sampled_at=sampled_at.get(model),
                                 undated_why=self.undated_why(model))
                for model, ready in ready_replicas.items()}

    @property
    def replica_rps(self) -> Mapping[str, float]:
        return self._replica_rps()

    def _latencies_ms(self, models: list[str], at: datetime) -> dict[str, float]:
        """Each model's latency by one grouped query per preset (its engine's, or
        ``latency_preset``), or ``latency_query``'s one per model; an engine without latency
        histograms (Triton) is read at its mean where a quantile or the time to first token
        is asked of the others."""
        def read(preset: str, group: list[str]) -> CurrentRates:
            histogram = preset in LATENCY_HISTOGRAMS
            try:
                return self.source.current_latencies_ms(
                    group, at, preset, self.latency_query,
                    self.latency_quantile if histogram else None,
                    self.latency_timed if histogram else "e2e")
            except SourceError as error:  # a query Prometheus refuses: each one's is unknown
                return CurrentRates({}, dict.fromkeys(group, str(error)))

        if not models:
            return {}
        got = read(self.latency_preset, models) if self.latency_query is not None else \
            self._by_preset(models, self.latency_preset, read)
        return self._noted("latency.unmeasured", got)

    def _by_preset(self, models: list[str], default: str,
                   read: Callable[[str, list[str]], CurrentRates],
                   exports: Callable[[str], bool] = lambda preset: True) -> CurrentRates:
        """``read`` of ``models`` by the preset of each one's engine (``default`` for a model
        without one), one read per preset that ``exports`` what is read, the results merged;
        a model of another preset is neither read nor unmeasured."""
        engines = self.source.engine_presets()
        groups: dict[str, list[str]] = {}
        for model in models:
            groups.setdefault(engines.get(model, default), []).append(model)
        rates: dict[str, float] = {}
        unknown: dict[str, str] = {}
        for preset, group in groups.items():
            if exports(preset):
                got = read(preset, group)
                rates |= got.rates
                unknown |= got.unknown
        return CurrentRates(rates, unknown)

    def _queued(self, models: list[str], at: datetime, growth: bool = False
                ) -> dict[str, float]:
        """The waiting requests (``growth``: how fast they grew) of the models whose engine
        exports them; a queue it cannot read is unknown, never a 0, and never fails the load
        reading (``_noted``)."""
        if self.queue_preset is None or not models:
            return {}
        got = self._by_preset(models, self.queue_preset, lambda preset, group:
                              self.source.current_queued(group, at, preset, growth))
        return self._noted("queue.unmeasured", got, growth=growth)

    def _kv_cache_usage(self, models: list[str], at: datetime) -> dict[str, float]:
        """The KV cache usage of the models whose engine exports it; unknown (never a 0)
        otherwise, and never failing the load reading (``_noted``)."""
        if self.kv_cache_preset is None or not models:
            return {}
        got = self._by_preset(models, self.kv_cache_preset, lambda preset, group:
                              self.source.current_kv_cache_usage(group, at, preset),
                              exports=KV_CACHE_GAUGES.__contains__)
        return self._noted("kv_cache.unmeasured", got)

    def _noted(self, event: str, got: CurrentRates, **extra: bool) -> dict[str, float]:
        """``got``'s values; its unknown models logged as ``event`` (with ``extra``): a warning
        when one becomes unmeasured, at debug level while it stays so (an engine that exports
        no such gauge would warn every tick)."""
        reading = f"{event}{sorted(extra.items())}"
        newly = set(got.unknown) - self._unmeasured.get(reading, frozenset())
        self._unmeasured[reading] = frozenset(got.unknown)
        if got.unknown:
            log.log(logging.WARNING if newly else logging.DEBUG, event,
                    extra={"models": sorted(got.unknown), **extra,
                           "error": next(iter(got.unknown.values()))})
        return got.rates


class PrometheusHistory:
    """``HistorySource`` of the forecast refresh: the models ``names`` lists (the store's), each
    one's history from Prometheus (weeks of it, so a new Headroom forecasts at once)."""

    def __init__(self, source: PrometheusSource, names: Callable[[], list[str]]) -> None:
        self.source = source
        self.names = names

    def model_names(self) -> list[str]:
        return self.names()

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        return self.source.rate_history(model, since_at, until_at, step_s)

    def read_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> SourcedSeries:
        return self.source.read_history(model, since_at, until_at, step_s)
