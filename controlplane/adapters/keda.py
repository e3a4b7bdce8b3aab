"""KEDA external scaler on Headroom's forecasts (``externalscaler.ExternalScaler``, REFERENCE.md
§7.2), served by the placement gRPC server so ScaledObjects can scale on forecasts, not on load.

Trigger metadata (``model``, ``targetRps``, ``lookaheadSeconds``, ``quantile``,
``activationTargetRps``, each also as ``<key>FromEnv``) is checked in ``keda_query``.

``GetMetrics`` returns the highest forecast quantile over the lookahead, ``GetMetricSpec`` the
per-replica target, so KEDA's HPA asks for ``ceil(forecast / target)`` replicas. ``IsActive``
(which alone moves the ScaledObject between 0 replicas and 1) is true while the forecast's
expected rate over the lookahead (its p50, not the upper tail: controlplane.domain.activity) or
the highest rate observed over the last lookahead (``RecentLoad``, the store, when given) is above
``activationTargetRps``. ``StreamIsActive`` and ``StreamMetricSpec`` send the
current answer at once and then whenever it changes (polling the forecast store); once a stream
has answered, an UNAVAILABLE or FAILED_PRECONDITION read (a store blip, a forecast stale for a
while) skips that update, logged once, instead of ending it. Each open
stream holds one of the gRPC server's worker threads, so at most ``max_streams``
(``autoscaling.keda_max_streams``, 128 by default: KEDA opens two per external-push
ScaledObject) are served at
once (the server is given that many threads more than its own): beyond that StreamMetricSpec is
UNIMPLEMENTED (KEDA then polls GetMetricSpec) and StreamIsActive RESOURCE_EXHAUSTED, rather than
the streams taking every thread and leaving Place, health checks and GetMetrics unanswered.
With ``caller_share`` (``autoscaling.keda_caller_share``, a quarter by default) one caller without
an unscoped client certificate (known by its address: ``scheduler.stream_shares``,
``callers.caller_shares``) holds at most that share of them, refused the same way beyond it, so
that a client without credentials (the service needs no token) cannot take every stream and
leave KEDA's own refused; KEDA under mutual TLS may use them all.
A model the scaler does not know (not in the store's models table, ``models``, when given;
without a per-replica target and without a forecast) is NOT_FOUND naming it, before any other
key of the metadata is checked, ``targetRps`` given or not; a known model without a per-replica
target needs ``targetRps`` (INVALID_ARGUMENT naming it). A missing forecast is NOT_FOUND, a stale
one FAILED_PRECONDITION (KEDA then applies its fallback),
as is one whose origin lies over a step plus ``MAX_CLOCK_SKEW_S`` (60 s) after now (a skewed
clock or a bad row: its age is negative, under any limit),
bad metadata INVALID_ARGUMENT naming the key, a forecast store that cannot be read UNAVAILABLE
(logged once per call, not an interpreter error with a traceback), a forecast holding NaN or
infinity FAILED_PRECONDITION naming the step (a NaN would read as zero and scale to zero). A
forecast made without any observation of the model (the forecaster's zeros with
``fallback_reason="no_observations"``) is FAILED_PRECONDITION too: its zeros mean "no data", and
served as a metric they would scale a serving model to zero. So is a forecast made from
observations over an hour old (``fallback_reason="stale_observations"``): it carries on a load the
source stopped reporting, and KEDA's ``fallback`` (``failureThreshold`` errors in a row, then
``fallback.replicas``) is the ScaledObject's own answer to a metric source that is unhealthy. The
error names the model, when its load was last observed and how long ago (from ``LastObservations``,
the store, when given). A model without observations that a demand hint floors inside the lookahead
(a launch announced for a model not serving yet; hints come in through ``HintedForecasts``) is
served that hinted demand, and IsActive is true (the hint floors its p50 too), so its
deployment scales up ahead of the launch.

Replica bounds and pauses (``StoredLimits``, read from the store at each call and stream poll,
so no restart is needed; the pure decision is ``controlplane.domain.scaler_limits``): a model
paused with ``headroom models pause NAME --replicas N`` is served N x the target (exactly N
replicas as KEDA counts, in thousandths) whatever its forecast, which is not even read, and is
active iff N > 0; a pause without a count holds the replicas its workload was last observed at
(``keda_limits``: FAILED_PRECONDITION when no fresh tick observed them). Otherwise the forecast
is clamped so that ``ceil(metric / target)`` lies within the models file's ``min_replicas`` /
``max_replicas``, and ``min_replicas`` > 0 makes the model active. The ScaledObject's own
``minReplicaCount`` / ``maxReplicaCount`` still apply on top (and the HPA's 10 % tolerance: it
keeps its replicas while the metric asks for within 10 % of them).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta

import grpc

from controlplane.adapters.keda_limits import StoredLimits
from controlplane.adapters.keda_query import (
    ScalerError,
    ScalerQuery,
    TargetRates,
    scaler_query,
    store_down,
)
from controlplane.adapters.keda_streams import KedaStreams
from controlplane.autoscaling.hints import HINT_RPS
from controlplane.domain.activity import expected_rps, is_active
from controlplane.domain.demand import (
    MAX_CLOCK_SKEW_S,
    from_the_future,
    origin_ahead_s,
    step_quantile,
    window_quantile,
)
from controlplane.domain.scaler_limits import ReplicaLimits, fixed_activity, scaler_metric
from controlplane.ports import Clock, ForecastReader, LastObservations, ModelNames, RecentLoad
from forecaster.types import Forecast
from protos.externalscaler import externalscaler_pb2 as pb
from protos.externalscaler import externalscaler_pb2_grpc as pb_grpc
from scheduler.service import bounded_details

#: ``Forecast.fallback_reason`` of a forecast made from no observation at all (forecaster.api)
NO_OBSERVATIONS = "no_observations"
#: ``Forecast.fallback_reason`` of a forecast whose newest observation was over an hour old
STALE_OBSERVATIONS = "stale_observations"
#: KEDA takes ``metricValueFloat`` in thousandths (``int64(v * 1000)``): a value past
#: int64 / 1000 wraps negative (the HPA would scale in).
MAX_METRIC_VALUE = 9e15
INT64_MAX = 2**63 - 1
#: Streams (StreamIsActive + StreamMetricSpec) served at once by default: KEDA opens both for
#: each ``external-push`` ScaledObject, so 128 serve 64 of them (``autoscaling.keda_max_streams``).
MAX_STREAMS = 128


def _no_observations(query: ScalerQuery) -> ScalerError:
    return ScalerError(grpc.StatusCode.FAILED_PRECONDITION,
                       f"forecast for model {query.model!r} was made without any observation "
                       f"of its load ({NO_OBSERVATIONS}) and no demand hint is in force within "
                       f"the {query.lookahead_s:.0f}s lookahead; its zeros are not a forecast "
                       "of zero")


class KedaScalerServicer(KedaStreams, pb_grpc.ExternalScalerServicer):
    def __init__(self, forecasts: ForecastReader, clock: Clock, *, lookahead_s: float = 600.0,
                 max_forecast_age_s: float = 1800.0,
                 target_rps: Mapping[str, float] | TargetRates | None = None,
                 poll_s: float = 5.0,
                 stopping: threading.Event | None = None, max_streams: int = MAX_STREAMS,
                 observations: LastObservations | None = None,
                 recent_load: RecentLoad | None = None,
                 limits: StoredLimits | None = None,
                 models: ModelNames | None = None,
                 caller_share: float | None = None) -> None:
        super().__init__(poll_s, stopping, max_streams, caller_share)
        self._forecasts = forecasts
        self._observations = observations
        self._recent_load = recent_load
        self._limits = limits
        self._models = models
        self._clock = clock
        self._lookahead_s = lookahead_s
        self._max_age_s = max_forecast_age_s
        self._targets: Mapping[str, float] | TargetRates = (
            target_rps if target_rps is not None else {})

    # -- queries ------------------------------------------------------------------------------
    def query(self, ref: pb.ScaledObjectRef) -> ScalerQuery:
        targets = (self._targets if isinstance(self._targets, Mapping)
                   else self._targets.targets())
        return scaler_query(ref.scalerMetadata, targets, self._lookahead_s, self._known)

    def _known(self, model: str) -> bool:
        """Whether ``model`` is in the models table (when given) or has a forecast."""
        try:
            if self._models is not None and model in self._models.model_names():
                return True
            made = self._forecasts.latest_forecasts().get(model)
        except Exception as error:  # the store is down: as for the forecasts
            raise store_down("keda.models_unread", "models and forecasts", model,
                             error) from None
        return made is not None and bool(made.p90)

    def forecast_rps(self, query: ScalerQuery) -> float:
        """The highest forecast quantile over [now, now + lookahead] for the model."""
        return self._forecast(query)[2]

    def metric(self, query: ScalerQuery) -> float:
        """GetMetrics' value: the forecast (not read for a paused model) within the model's
        replica bounds, or the replicas a pause holds (``domain.scaler_limits``)."""
        limits = self.limits(query.model)
        found = None if limits.held is not None else self.forecast_rps(query)
        # beyond MAX_METRIC_VALUE KEDA's thousandths wrap negative
        return min(scaler_metric(found, query.target_rps, limits), MAX_METRIC_VALUE)

    def limits(self, model: str) -> ReplicaLimits:
        """The model's replica bounds and the replicas its pause holds, read now (none: no
        ``limits`` given)."""
        return ReplicaLimits() if self._limits is None else self._limits.limits(model)

    def is_active(self, query: ScalerQuery) -> bool:
        """Whether the model needs a replica: as its pause or ``min_replicas`` fix it, else while
        its expected (p50) rate over the lookahead or its highest observed rate over the last
        lookahead is above ``activation_rps``; the errors are GetMetrics' (a forecast that
        cannot be served says nothing about activity either)."""
        fixed = fixed_activity(self.limits(query.model))
        if fixed is not None:
            return fixed
        made, now, _ = self._forecast(query)
        return is_active(expected_rps(made, now, query.lookahead_s),
                         self._observed_peak(query, now), query.activation_rps)

    def _observed_peak(self, query: ScalerQuery, now: datetime) -> float | None:
        if self._recent_load is None:
            return None
        try:
            return self._recent_load.peak_rps_since(
                query.model, now - timedelta(seconds=query.lookahead_s))
        except Exception as error:  # the store is down: as for the forecasts
            raise store_down("keda.observations_unread", "observed load", query.model,
                              error) from None

    def _forecast(self, query: ScalerQuery) -> tuple[Forecast, datetime, float]:
        """The model's forecast if it may be served, now, and its highest quantile over
        [now, now + lookahead]."""
        try:
            made = self._forecasts.latest_forecasts().get(query.model)
        except Exception as error:  # the store is down: an error KEDA counts to its fallback
            raise store_down("keda.forecasts_unread", "forecasts", query.model, error) from None
        if made is None or not made.p90:
            raise ScalerError(grpc.StatusCode.NOT_FOUND, f"no forecast for model {query.model!r}")
        bad = next(((i, v) for i, pair in enumerate(zip(made.p50, made.p90, strict=True))
                    for v in pair if not math.isfinite(v)), None)
        if bad is not None:
            raise ScalerError(grpc.StatusCode.FAILED_PRECONDITION,
                              f"forecast for model {query.model!r} holds {bad[1]} at step "
                              f"{bad[0]}; it is not served as a metric")
        blind = made.fallback_reason == NO_OBSERVATIONS
        if blind and HINT_RPS not in made.diagnostics:
            raise _no_observations(query)
        now = self._clock.now()
        if made.fallback_reason == STALE_OBSERVATIONS:
            raise ScalerError(grpc.StatusCode.FAILED_PRECONDITION,
                              f"forecast for model {query.model!r} was made from observations "
                              f"over an hour old ({STALE_OBSERVATIONS}): "
                              f"{self._last_observed(query.model, now)}; it is served again "
                              "once a forecast is made from fresh observations")
        age_s = (now - made.origin_at).total_seconds()
        if age_s > self._max_age_s:
            raise ScalerError(grpc.StatusCode.FAILED_PRECONDITION,
                              f"forecast for model {query.model!r} is {age_s:.0f}s old "
                              f"(limit {self._max_age_s:.0f}s)")
        if from_the_future(made, now):
            raise ScalerError(grpc.StatusCode.FAILED_PRECONDITION,
                              f"forecast for model {query.model!r} has its origin at "
                              f"{made.origin_at.isoformat()}, "
                              f"{origin_ahead_s(made, now):.0f}s after now ({now.isoformat()}); "
                              f"more than one step ({made.step_s}s) plus {MAX_CLOCK_SKEW_S:.0f}s "
                              "ahead is a skewed clock (the forecast job's or this server's) or "
                              "a bad row, and it is not served")
        found = window_quantile(made, now, query.lookahead_s, query.quantile)
        if found is None:  # no step overlaps the window: the step nearest to it stands in
            # (the last one of a forecast that has run out, as in the reconcile loop's demand;
            # the first one of a forecast that starts after the window)
            nearest = 0 if made.origin_at > now else len(made.p90) - 1
            found = step_quantile(made, nearest, query.quantile)
        if blind and not found > 0:  # no hint's floor inside the lookahead: still "no data"
            raise _no_observations(query)
        return made, now, max(0.0, found)

    def _last_observed(self, model: str, now: datetime) -> str:
        if self._observations is None:
            return "when its load was last observed is not known here"
        last_at = self._observations.last_observed_at(model)
        if last_at is None:
            return "no observation of its load is stored"
        age_s = (now - last_at).total_seconds()
        return f"its load was last observed at {last_at.isoformat()}, {age_s:.0f}s ago"

    def _spec(self, query: ScalerQuery) -> pb.GetMetricSpecResponse:
        """The per-replica target; KEDA reads ``targetSizeFloat`` (always > 0 here). The
        deprecated int64 ``targetSize``, for a KEDA that reads only it, is rounded down (at
        least 1): the HPA asks for ``ceil(metric / target)``, so a target rounded up would ask
        for fewer replicas than the forecast needs (as ``metricValue`` is rounded up)."""
        return pb.GetMetricSpecResponse(metricSpecs=[pb.MetricSpec(
            metricName=query.metric_name, targetSize=max(1, math.floor(query.target_rps)),
            targetSizeFloat=query.target_rps)])

    # -- RPCs ---------------------------------------------------------------------------------
    def _call(self, context: grpc.ServicerContext, fn: Callable[[], object]) -> object:
        try:
            return fn()
        except ScalerError as error:
            context.abort(error.code, bounded_details(str(error)))
            raise  # abort raises; this line is never reached

    def IsActive(self, request: pb.ScaledObjectRef,
                 context: grpc.ServicerContext) -> pb.IsActiveResponse:
        result = self._call(context, lambda: self.is_active(self.query(request)))
        return pb.IsActiveResponse(result=bool(result))

    def GetMetricSpec(self, request: pb.ScaledObjectRef,
                      context: grpc.ServicerContext) -> pb.GetMetricSpecResponse:
        spec = self._call(context, lambda: self._spec(self.query(request)))
        assert isinstance(spec, pb.GetMetricSpecResponse)
        return spec

    def GetMetrics(self, request: pb.GetMetricsRequest,
                   context: grpc.ServicerContext) -> pb.GetMetricsResponse:
        query = self._call(context, lambda: self.query(request.scaledObjectRef))
        assert isinstance(query, ScalerQuery)
        value = self._call(context, lambda: self.metric(query))
        assert isinstance(value, float)
        return pb.GetMetricsResponse(metricValues=[pb.MetricValue(
            metricName=request.metricName or query.metric_name,
            metricValue=min(math.ceil(value), INT64_MAX), metricValueFloat=value)])

    def StreamIsActive(self, request: pb.ScaledObjectRef,
                       context: grpc.ServicerContext) -> Iterator[pb.IsActiveResponse]:
        self._call(context, lambda: self.query(request))  # bad metadata: refused before a slot
        for active in self._stream(context, grpc.StatusCode.RESOURCE_EXHAUSTED,
                                   "poll IsActive instead (trigger type external)",
                                   lambda: self.is_active(self.query(request))):
            yield pb.IsActiveResponse(result=bool(active))

    def StreamMetricSpec(self, request: pb.ScaledObjectRef,
                         context: grpc.ServicerContext) -> Iterator[pb.GetMetricSpecResponse]:
        self._call(context, lambda: self.query(request))
        # the query is read again at every poll: the default target follows the profile the
        # reconcile loop corrects, as GetMetricSpec's does (REFERENCE.md 7.2: they must agree)
        for spec in self._stream(context, grpc.StatusCode.UNIMPLEMENTED,
                                 "poll GetMetricSpec instead",
                                 lambda: self._spec(self.query(request))):
            assert isinstance(spec, pb.GetMetricSpecResponse)
            yield spec


def keda_registrar(servicer: KedaScalerServicer) -> Callable[[grpc.Server], str]:
    """For ``scheduler.server.create_server(..., extra_servicers=[keda_registrar(s)])``."""
    def register(server: grpc.Server) -> str:
        pb_grpc.add_ExternalScalerServicer_to_server(servicer, server)
        return str(pb.DESCRIPTOR.services_by_name["ExternalScaler"].full_name)
    return register
