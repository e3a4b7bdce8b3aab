"""Prometheus for ``headroom serve`` with ``backend: kubernetes``: each model's request rate
every tick (``PrometheusLoad``, the reader's ``LoadSource``) and the stored models' history for
the forecast refresh (``PrometheusHistory``), through the one client that settings
``prometheus`` describe (``headroom forecast run --prometheus-url`` builds it the same way)."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from controlplane.domain.models import ModelSpec, RpsByModel, live_rps
from controlplane.domain.observed import ModelLoad
from controlplane.settings import ConfigError
from controlplane.settings_cluster import PrometheusSettings
from forecaster.errors import SourceError
from forecaster.sources.prometheus import PrometheusSource
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
                      models: list[str] | None = None) -> PrometheusSource:
    """A source on ``url`` (default ``prometheus.url``) with the settings' credentials, rate
    window and timeout; ``metric``/``query`` override the settings' preset and PromQL. The
    bearer token file is read here, once. Bad settings are a ConfigError naming them."""
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
            sample_series=settings.query_sample_series if query is None else None)
    except SourceError as error:
        raise ConfigError(f"prometheus: {error}") from None


def per_replica_rps(specs: Sequence[ModelSpec]) -> dict[str, float]:
    """What one replica of each model serves: its best profile point's ``replica_rps`` (one MPS
    process's part of a segment shared by MPS), as the live sizing and the simulated fleet
    count capacity."""
    return {s.name: s.best_point().replica_rps for s in specs}


class PrometheusLoad:
    """``LoadSource``: demand = the model's measured request rate, capacity = ready replicas x
    its per-replica throughput, its request latency (``latency_preset``'s grouped query:
    the mean, or ``latency_quantile`` of vLLM's histogram; or ``latency_query`` per model) and
    the requests waiting in its replicas' queues (``queue_preset``). A model Prometheus could
    not measure is unknown, not 0; a latency or queue it could not read is None (logged) and
    never fails the load reading."""

    def __init__(self, source: PrometheusSource,
                 replica_rps: RpsByModel,
                 latency_preset: str = "triton", latency_query: str | None = None,
                 latency_quantile: float | None = None,
                 queue_preset: str | None = None) -> None:
        """``replica_rps``: each model's per-replica throughput, or what gives the current
        one at each reading (``serve``'s models in use, reloaded without a restart);
        ``queue_preset``: the engine whose waiting-requests gauge is read each tick
        (``QUEUE_GAUGES``), None: no queue read."""
        self.source = source
        self._replica_rps = live_rps(replica_rps)
        self.latency_preset = latency_preset
        self.latency_query = latency_query
        self.latency_quantile = latency_quantile
        self.queue_preset = queue_preset
        self.undated_why = ""
        if source.query_template is not None and source.sample_series is None:
            self.undated_why = ("the custom prometheus.query carries no sample time (set "
                                "prometheus.query_sample_series)")
            log.warning("load.undated", extra={"why": self.undated_why})

    def measure(self, ready_replicas: Mapping[str, int], at: datetime) -> dict[str, ModelLoad]:
        models = sorted(ready_replicas)
        rates = self.source.current_rates(models, at)
        if rates.unknown:
            log.warning("load.unmeasured", extra={"models": sorted(rates.unknown),
                                                  "error": next(iter(rates.unknown.values()))})
        latencies = self._latencies_ms(models, at)
        queued = self._queued(models, at)
        growth = self._queued(sorted(queued), at, growth=True)  # of the queues read
        sampled_at = {m: datetime.fromtimestamp(t, UTC) for m, t in rates.sampled_at.items()}
        replica_rps = self.replica_rps
        return {model: ModelLoad(rates.rates.get(model),
                                 ready * replica_rps.get(model, 0.0),
                                 rates.unknown.get(model, ""),
                                 latency_ms=latencies.get(model),
                                 queued_requests=queued.get(model),
                                 queue_growth_rps=growth.get(model),
                                 sampled_at=sampled_at.get(model),
                                 undated_why=self.undated_why)
                for model, ready in ready_replicas.items()}

    @property
    def replica_rps(self) -> Mapping[str, float]:
        return self._replica_rps()

    def _latencies_ms(self, models: list[str], at: datetime) -> dict[str, float]:
        try:
            got = self.source.current_latencies_ms(models, at, self.latency_preset,
                                                   self.latency_query, self.latency_quantile)
        except SourceError as error:
            log.warning("latency.unmeasured", extra={"models": models, "error": str(error)})
            return {}
        if got.unknown:
            log.warning("latency.unmeasured", extra={"models": sorted(got.unknown),
                                                     "error": next(iter(got.unknown.values()))})
        return got.rates

    def _queued(self, models: list[str], at: datetime, growth: bool = False
                ) -> dict[str, float]:
        """The waiting requests (``growth``: how fast they grew) of the models whose engine
        exports them; a queue it cannot read is unknown (logged), never a 0, and never fails
        the load reading."""
        if self.queue_preset is None or not models:
            return {}
        got = self.source.current_queued(models, at, self.queue_preset, growth)
        if got.unknown:
            log.warning("queue.unmeasured", extra={"models": sorted(got.unknown),
                                                   "growth": growth,
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
