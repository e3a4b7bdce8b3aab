"""KEDA external scaler over a real gRPC channel: metrics are the forecast's upper quantile over
the lookahead, the spec is the per-replica target, activity follows the forecast."""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rich.console import Console

from controlplane.adapters.keda import KedaScalerServicer, keda_registrar
from controlplane.placement_api import start_placement_api
from controlplane.runtime import keda_servicer
from controlplane.settings import ConfigError, load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from forecaster.types import Forecast
from protos.externalscaler import externalscaler_pb2 as pb
from protos.externalscaler import externalscaler_pb2_grpc as pb_grpc
from scheduler.engine import PlacementEngine
from scheduler.server import DEFAULT_WORKERS, create_server, stop

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)


class MemoryForecasts:
    def __init__(self) -> None:
        self.by_model: dict[str, Forecast] = {}
        self.lock = threading.Lock()

    def latest_forecasts(self) -> Mapping[str, Forecast]:
        with self.lock:
            return dict(self.by_model)


def _forecast(model: str, p90: tuple[float, ...], origin_at: datetime = T0) -> Forecast:
    return Forecast(model, origin_at, 60, tuple(v / 1.2 for v in p90), p90, "test")


Scaler = tuple[pb_grpc.ExternalScalerStub, MemoryForecasts, KedaScalerServicer]


@pytest.fixture
def scaler() -> Iterator[Scaler]:
    forecasts = MemoryForecasts()
    servicer = KedaScalerServicer(forecasts, VirtualClock(T0), lookahead_s=180,
                                  target_rps={"llama": 40.0}, poll_s=0.05)
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.ExternalScalerStub(channel), forecasts, servicer
    finally:
        servicer.stopping.set()
        channel.close()
        stop(server, 0)


def _ref(**metadata: str) -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(name="llama", namespace="serving", scalerMetadata=metadata)


def _every_call(stub: pb_grpc.ExternalScalerStub, model: str) -> list[Callable[[], object]]:
    """IsActive, GetMetrics and the first StreamIsActive answer for ``model``."""
    return [lambda: stub.IsActive(_ref(model=model)),
            lambda: stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=_ref(model=model))),
            lambda: next(stub.StreamIsActive(_ref(model=model), timeout=10))]


def test_metrics_are_the_highest_p90_inside_the_lookahead(scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["llama"] = _forecast("llama", (100.0, 160.0, 120.0, 110.0, 900.0))
    reply = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=_ref(model="llama"),
                                                 metricName="headroom-llama"))
    (value,) = reply.metricValues
    assert value.metricName == "headroom-llama"
    assert value.metricValueFloat == pytest.approx(160.0)  # 900 at +4 min is past the 3 minutes
    assert value.metricValue == 160


def test_a_huge_forecast_is_served_as_the_most_kedas_thousandths_hold_not_wrapped_negative(
        scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["llama"] = _forecast("llama", (1e300, 1e300, 1e300))
    (value,) = stub.GetMetrics(pb.GetMetricsRequest(
        scaledObjectRef=_ref(model="llama"))).metricValues
    assert value.metricValueFloat == 9e15 and value.metricValue == 9 * 10**15
    assert value.metricValueFloat * 1000 < 2**63  # KEDA's int64(v * 1000) holds it
    assert stub.IsActive(_ref(model="llama")).result is True


def test_metadata_can_ask_for_a_longer_window_and_a_higher_quantile(scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["llama"] = _forecast("llama", (100.0, 160.0, 120.0, 110.0, 900.0))
    wide = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=_ref(
        model="llama", lookaheadSeconds="300"))).metricValues[0].metricValueFloat
    high = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=_ref(
        model="llama", quantile="0.99"))).metricValues[0].metricValueFloat
    assert wide == pytest.approx(900.0)
    assert high > 160.0


def test_the_spec_is_the_per_replica_target_from_metadata_or_the_profile(scaler: Scaler) -> None:
    stub, _, _ = scaler
    from_profile = stub.GetMetricSpec(_ref(model="llama")).metricSpecs[0]
    from_metadata = stub.GetMetricSpec(_ref(model="llama", targetRps="12.5")).metricSpecs[0]
    assert (from_profile.metricName, from_profile.targetSizeFloat) == ("headroom-llama", 40.0)
    assert from_metadata.targetSizeFloat == 12.5 and from_metadata.targetSize == 12


@pytest.mark.parametrize(("target_rps", "target_size"), [("9.6", 9), ("12.5", 12), ("0.4", 1)])
def test_the_deprecated_integer_target_is_rounded_down_so_a_keda_reading_it_never_under_sizes(
        scaler: Scaler, target_rps: str, target_size: int) -> None:
    """The HPA asks for ceil(metric / target): a larger target means fewer replicas, so the
    int64 targetSize (read by a KEDA that ignores targetSizeFloat) must not round up."""
    stub, _, _ = scaler
    (spec,) = stub.GetMetricSpec(_ref(model="llama", targetRps=target_rps)).metricSpecs
    assert spec.targetSize == target_size and spec.targetSizeFloat == float(target_rps)


def test_a_model_is_active_only_while_its_forecast_is_above_zero(scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["llama"] = _forecast("llama", (0.0, 0.0, 0.0))
    assert stub.IsActive(_ref(model="llama")).result is False
    forecasts.by_model["llama"] = _forecast("llama", (0.0, 3.0, 0.0))
    assert stub.IsActive(_ref(model="llama")).result is True


@pytest.mark.parametrize(("metadata", "code", "text"), [
    ({}, grpc.StatusCode.INVALID_ARGUMENT, "scalerMetadata.model"),
    ({"model": "llama", "targetRps": "fast"}, grpc.StatusCode.INVALID_ARGUMENT,
     "scalerMetadata.targetRps"),
    ({"model": "old"}, grpc.StatusCode.INVALID_ARGUMENT,
     "scalerMetadata.targetRps is required: model 'old' has no per-replica rate here (models "
     "with one: llama)"),
    ({"model": "mistral"}, grpc.StatusCode.NOT_FOUND,
     "model 'mistral' is not a model of this store (headroom models list) and has no forecast"),
    ({"model": "mistral", "targetRps": "5"}, grpc.StatusCode.NOT_FOUND,
     "model 'mistral' is not a model of this store (headroom models list) and has no forecast"),
    ({"model": "old", "targetRps": "5"}, grpc.StatusCode.FAILED_PRECONDITION, "old"),
    ({"model": "llama", "targetRps": "1e30"}, grpc.StatusCode.INVALID_ARGUMENT,
     "scalerMetadata.targetRps must be at most"),
    ({"model": "llama", "lookaheadSeconds": "1e308"}, grpc.StatusCode.INVALID_ARGUMENT,
     "scalerMetadata.lookaheadSeconds must be at most"),
    ({"model": "llama", "targetRps": "0.0004"}, grpc.StatusCode.INVALID_ARGUMENT,
     "scalerMetadata.targetRps must be at least 0.001 (KEDA counts it in thousandths: less is "
     "a target of 0), got '0.0004'"),
], ids=["no model", "bad target", "no target known", "unknown model",
        "unknown model with a target", "stale forecast",
        "target beyond int64", "lookahead beyond timedelta", "target under a thousandth"])
def test_bad_metadata_and_missing_or_stale_forecasts_are_named_errors(
        scaler: Scaler, metadata: dict[str, str], code: grpc.StatusCode, text: str) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["old"] = _forecast("old", (5.0,), T0 - timedelta(hours=2))
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=_ref(**metadata)))
    assert caught.value.code() == code and text in (caught.value.details() or "")


def test_stream_is_active_sends_the_current_state_then_each_change(scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["llama"] = _forecast("llama", (0.0, 0.0))
    stream = stub.StreamIsActive(_ref(model="llama"), timeout=10)
    assert next(stream).result is False
    with forecasts.lock:
        forecasts.by_model["llama"] = _forecast("llama", (7.0, 7.0))
    assert next(stream).result is True
    stream.cancel()


def test_stream_metric_spec_sends_the_spec_at_once(scaler: Scaler) -> None:
    stub, _, _ = scaler
    stream = stub.StreamMetricSpec(_ref(model="llama"), timeout=10)
    assert next(stream).metricSpecs[0].targetSizeFloat == 40.0
    stream.cancel()


class MovingTargets:
    """Stands in for CorrectedTargets: the reconcile loop corrects a model's profile."""

    def __init__(self, rps: float) -> None:
        self.rps = rps

    def targets(self) -> Mapping[str, float]:
        return {"llama": self.rps}


def test_stream_metric_spec_follows_a_corrected_target_as_get_metric_spec_does() -> None:
    targets = MovingTargets(32.0)
    servicer = KedaScalerServicer(MemoryForecasts(), VirtualClock(T0), target_rps=targets,
                                  poll_s=0.05)
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.ExternalScalerStub(channel)
        stream = stub.StreamMetricSpec(_ref(model="llama"), timeout=10)
        assert next(stream).metricSpecs[0].targetSizeFloat == 32.0
        targets.rps = 20.0
        assert next(stream).metricSpecs[0].targetSizeFloat == 20.0
        assert stub.GetMetricSpec(_ref(model="llama")).metricSpecs[0].targetSizeFloat == 20.0
        stream.cancel()
    finally:
        servicer.stopping.set()
        channel.close()
        stop(server, 0)


def test_a_forecast_made_without_observations_is_an_error_not_a_zero_that_scales_to_zero(
        scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["llama"] = Forecast("llama", T0, 60, (0.0,) * 3, (0.0,) * 3,
                                           "persistence", fallback_reason="no_observations")
    for call in _every_call(stub, "llama"):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "without any observation" in (caught.value.details() or "")


def _stale(model: str) -> Forecast:
    """A forecast made now whose newest observation was over an hour old: the persistence of a
    load the source stopped reporting."""
    return Forecast(model, T0, 60, (30.0,) * 3, (36.0,) * 3, "persistence",
                    fallback_reason="stale_observations")


def test_a_forecast_made_from_stale_observations_fails_so_keda_applies_its_fallback(
        tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'keda.db'}", migrate=True)
    model = DEMO_MODELS[0].name
    store.save_observations([(model, T0 - timedelta(minutes=95), 30.0),
                             (model, T0 - timedelta(minutes=90), 30.0)])
    unseen = DEMO_MODELS[1].name
    store.save_forecasts([_stale(model), _stale(unseen)], computed_at=T0)
    servicer = keda_servicer(load_settings(None), store, VirtualClock(T0), DEMO_MODELS)
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.ExternalScalerStub(channel)
    try:
        for call in (lambda: stub.IsActive(_ref(model=model)),
                     lambda: stub.GetMetrics(pb.GetMetricsRequest(
                         scaledObjectRef=_ref(model=model)))):
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert (f"forecast for model {model!r} was made from observations over an hour old "
                    "(stale_observations): its load was last observed at "
                    "2026-01-05T10:30:00+00:00, 5400s ago") in (caught.value.details() or "")
        with pytest.raises(grpc.RpcError) as caught:
            stub.IsActive(_ref(model=unseen))
        assert "no observation of its load is stored" in (caught.value.details() or "")
    finally:
        servicer.stopping.set()
        channel.close()
        stop(server, 0)
        store.engine.dispose()


def test_a_stale_observations_forecast_fails_every_call_even_without_an_observation_store(
        scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["llama"] = _stale("llama")
    for call in _every_call(stub, "llama"):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        details = caught.value.details() or ""
        assert "'llama'" in details and "stale_observations" in details
        assert "when its load was last observed is not known here" in details


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["NaN", "infinity"])
def test_a_forecast_holding_nan_or_infinity_is_an_error_naming_the_step_not_a_zero(
        scaler: Scaler, bad: float) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["llama"] = _forecast("llama", (bad, 20.0, 30.0))
    for call in _every_call(stub, "llama"):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert f"forecast for model 'llama' holds {bad} at step 0" in (
            caught.value.details() or "")


class DownForecasts:
    """A forecast store whose database refuses connections."""

    def latest_forecasts(self) -> Mapping[str, Forecast]:
        raise ConnectionRefusedError("connection to 127.0.0.1:5432 refused\n[SQL: SELECT ...]")


def test_a_forecast_store_that_is_down_is_unavailable_naming_the_model_and_the_error() -> None:
    servicer = KedaScalerServicer(DownForecasts(), VirtualClock(T0), target_rps={"llama": 40.0})
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.ExternalScalerStub(channel)
    try:
        for call in _every_call(stub, "llama"):
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            assert caught.value.details() == (
                "forecasts cannot be read for model 'llama': connection to 127.0.0.1:5432 refused")
    finally:
        servicer.stopping.set()
        channel.close()
        stop(server, 0)


def test_a_forecast_that_has_run_out_but_is_not_stale_serves_its_last_step_not_its_first(
        scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    # five one-minute steps made 25 minutes ago (younger than the 30-minute staleness limit)
    forecasts.by_model["llama"] = _forecast("llama", (10.0, 20.0, 40.0, 80.0, 200.0),
                                            T0 - timedelta(minutes=25))
    reply = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=_ref(model="llama")))
    assert reply.metricValues[0].metricValueFloat == pytest.approx(200.0)
    assert reply.metricValues[0].metricValue == 200


def test_the_servers_scaler_rereads_its_streams_every_keda_poll_s_of_the_settings(
        tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'keda.db'}", migrate=True)
    model = DEMO_MODELS[0].name
    store.save_forecasts([_forecast(model, (0.0, 0.0))], computed_at=T0)
    settings = load_settings(None, autoscaling={"keda_poll_s": 0.05})
    servicer = keda_servicer(settings, store, VirtualClock(T0), DEMO_MODELS)
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stream = pb_grpc.ExternalScalerStub(channel).StreamIsActive(
            _ref(model=model), timeout=2)  # the default 5 s would miss this deadline
        assert next(stream).result is False
        store.save_forecasts([_forecast(model, (9.0, 9.0))], computed_at=T0)
        assert next(stream).result is True
        stream.cancel()
    finally:
        servicer.stopping.set()
        channel.close()
        stop(server, 0)
        store.engine.dispose()


def test_an_unknown_model_is_not_found_naming_it_whether_or_not_target_rps_is_given(
        tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'keda.db'}", migrate=True)
    served, listed = DEMO_MODELS[0], DEMO_MODELS[1]
    store.upsert_models([served, listed])  # ``listed`` is in the table but not in use here
    servicer = keda_servicer(load_settings(None), store, VirtualClock(T0), [served])
    unknown = "model 'no-such-model' is not a model of this store (headroom models list)"
    try:
        with _served(servicer) as stub:
            for metadata in ({"model": "no-such-model"},
                             {"model": "no-such-model", "targetRps": "5"},
                             {"model": "no-such-model", "targetRps": "fast"}):
                ref = _ref(**metadata)
                calls: list[Callable[[], object]] = [
                    partial(stub.GetMetricSpec, ref), partial(stub.IsActive, ref),
                    partial(stub.GetMetrics, pb.GetMetricsRequest(scaledObjectRef=ref))]
                for call in calls:
                    with pytest.raises(grpc.RpcError) as caught:
                        call()
                    assert caught.value.code() == grpc.StatusCode.NOT_FOUND, metadata
                    assert (caught.value.details() or "").startswith(unknown), metadata
            with pytest.raises(grpc.RpcError) as no_target:
                stub.GetMetricSpec(_ref(model=listed.name))
            assert no_target.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert (no_target.value.details() or "").startswith(
                f"scalerMetadata.targetRps is required: model {listed.name!r}")
            spec = stub.GetMetricSpec(_ref(model=listed.name, targetRps="5")).metricSpecs[0]
            assert spec.targetSizeFloat == 5.0
            with pytest.raises(grpc.RpcError) as no_forecast:
                stub.GetMetrics(pb.GetMetricsRequest(
                    scaledObjectRef=_ref(model=listed.name, targetRps="5")))
            assert no_forecast.value.code() == grpc.StatusCode.NOT_FOUND
            assert no_forecast.value.details() == f"no forecast for model {listed.name!r}"
    finally:
        store.engine.dispose()


def _llama_scaler(poll_s: float, max_streams: int) -> KedaScalerServicer:
    """A scaler whose only model, llama, is forecast at 5 rps (active) for a 40-rps target."""
    forecasts = MemoryForecasts()
    forecasts.by_model["llama"] = _forecast("llama", (5.0, 5.0))
    return KedaScalerServicer(forecasts, VirtualClock(T0), target_rps={"llama": 40.0},
                              poll_s=poll_s, max_streams=max_streams)


@contextmanager
def _scaler_api(servicer: KedaScalerServicer
                ) -> Iterator[tuple[pb_grpc.ExternalScalerStub, grpc.Channel]]:
    """``servicer`` on the placement API's server on 127.0.0.1 (its stream workers as
    ``headroom serve`` sizes them): a stub and its channel, the server stopped afterwards."""
    out = io.StringIO()
    stop_api, _ = start_placement_api(load_settings(None, placement={"listen": "127.0.0.1:0"}),
                                      PlacementEngine(), [keda_registrar(servicer)],
                                      Console(file=out), stream_workers=servicer.max_streams)
    port = re.search(r"127\.0\.0\.1:(\d+)", out.getvalue())
    assert port is not None
    channel = grpc.insecure_channel(f"127.0.0.1:{port[1]}")
    try:
        yield pb_grpc.ExternalScalerStub(channel), channel
    finally:
        servicer.stopping.set()
        channel.close()
        stop_api()


def test_keda_streams_beyond_max_streams_are_refused_and_never_starve_the_servers_other_calls(
        ) -> None:
    servicer = _llama_scaler(poll_s=0.05, max_streams=3)
    with _scaler_api(servicer) as (stub, channel):
        # more streams than the server has threads (headroom serve, external-push triggers)
        streams = [stub.StreamIsActive(_ref(model="llama"), timeout=20)
                   for _ in range(DEFAULT_WORKERS + 6)]
        answers: list[bool | grpc.StatusCode] = []
        for stream in streams:
            try:
                answers.append(next(stream).result)
            except grpc.RpcError as error:
                answers.append(error.code())
        assert answers.count(True) == 3
        assert answers.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == DEFAULT_WORKERS + 3
        with pytest.raises(grpc.RpcError) as refused:
            next(stub.StreamMetricSpec(_ref(model="llama"), timeout=5))
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED  # KEDA then polls
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                            timeout=2)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        assert stub.IsActive(_ref(model="llama"), timeout=2).result is True
        for stream in streams:
            stream.cancel()
        _wait_for(lambda: servicer.open_streams() == 0)  # a cancelled stream frees its place
        assert next(stub.StreamMetricSpec(_ref(model="llama"), timeout=5)).metricSpecs


def test_cancelled_keda_streams_free_their_threads_at_once_so_reopening_never_starves_calls(
        ) -> None:
    # found by gRPC fuzzing: a stream between polls held its worker thread for up to poll_s
    # (keda_poll_s, 5 s by default) after KEDA cancelled it, while max_streams had already let
    # its place go, so KEDA reopening its streams filled the pool and every other call of the
    # server (IsActive, health, ListBindings) waited seconds behind them
    with _scaler_api(_llama_scaler(poll_s=60.0, max_streams=2)) as (stub, _channel):
        started = time.monotonic()
        for _ in range(DEFAULT_WORKERS):  # 2 streams at a time, each answered, then cancelled
            streams = [_stream_once_a_slot_is_free(stub) for _ in range(2)]
            assert [active for _, active in streams] == [True, True]
            for stream, _ in streams:
                stream.cancel()
        assert stub.IsActive(_ref(model="llama"), timeout=20).result is True
        # before: a cancelled stream kept its thread for the poll (60 s here), so the pool
        # filled after a few rounds and the next streams waited for a thread past their deadline
        assert time.monotonic() - started < 10.0


def _stream_once_a_slot_is_free(stub: pb_grpc.ExternalScalerStub) -> tuple[Any, bool]:
    """A StreamIsActive stream of llama and its first answer; RESOURCE_EXHAUSTED (a cancelled
    stream's thread not yet out, a few ms) is retried for up to 5 s."""
    until = time.monotonic() + 5.0
    while True:
        stream = stub.StreamIsActive(_ref(model="llama"), timeout=20)
        try:
            return stream, next(stream).result
        except grpc.RpcError as error:
            if (error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED
                    or time.monotonic() > until):
                raise
            time.sleep(0.01)


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    until = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < until, "condition not met in time"
        time.sleep(0.05)


def test_a_forecast_from_beyond_the_clock_skew_tolerance_in_the_future_is_refused_like_a_stale_one(
        scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    ahead_at = T0 + timedelta(hours=1)
    forecasts.by_model["llama"] = _forecast("llama", (50.0,) * 90, ahead_at)
    for call in _every_call(stub, "llama"):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert (f"forecast for model 'llama' has its origin at {ahead_at.isoformat()}, 3600s "
                f"after now ({T0.isoformat()})") in (caught.value.details() or "")


def test_a_forecast_from_within_a_step_and_the_clock_skew_tolerance_in_the_future_is_served(
        scaler: Scaler) -> None:
    stub, forecasts, _ = scaler
    # one 60-second step (a forecast of the next step) plus 60 seconds of clock skew
    forecasts.by_model["llama"] = _forecast("llama", (50.0,) * 5, T0 + timedelta(seconds=120))
    assert stub.IsActive(_ref(model="llama")).result is True
    metric = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=_ref(model="llama")))
    assert metric.metricValues[0].metricValueFloat == 50.0


# -- activation: IsActive alone moves a ScaledObject between zero replicas and one -------------

def _night(model: str = "llama") -> Forecast:
    """A model idle every night, forecast at 05:00 by the job's forecaster (c6 of the review,
    fourteen days of history): a median of a few thousandths of a request per second, the
    calibrated upper tail around 0.12 rps, never 0."""
    p50 = (0.0022, 0.0017, 0.0013, 0.0013, 0.0013, 0.0014, 0.0014, 0.0014, 0.0014, 0.0014)
    return Forecast(model, T0, 60, p50, (0.12,) * len(p50), "hybrid")


def _day(model: str = "llama") -> Forecast:
    return Forecast(model, T0, 60, (5.0,) * 10, (6.5,) * 10, "hybrid")


class PeakLoad:
    """Stands in for the store's observed load: one peak for every model and window."""

    def __init__(self, peak_rps: float | None) -> None:
        self.peak_rps = peak_rps
        self.asked_since: list[datetime] = []

    def peak_rps_since(self, model: str, since_at: datetime) -> float | None:
        self.asked_since.append(since_at)
        return self.peak_rps


def _night_scaler(load: PeakLoad | None = None) -> tuple[KedaScalerServicer, MemoryForecasts]:
    forecasts = MemoryForecasts()
    forecasts.by_model["llama"] = _night()
    return KedaScalerServicer(forecasts, VirtualClock(T0), lookahead_s=600,
                              target_rps={"llama": 20.0}, poll_s=0.05, recent_load=load), forecasts


def test_a_model_idle_all_night_is_inactive_though_its_upper_tail_is_not_zero() -> None:
    servicer, _ = _night_scaler(PeakLoad(None))
    with _served(servicer) as stub:
        assert stub.IsActive(_ref(model="llama")).result is False
        assert next(stub.StreamIsActive(_ref(model="llama"), timeout=10)).result is False
        metric = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=_ref(model="llama")))
        assert metric.metricValues[0].metricValueFloat == pytest.approx(0.12)  # as before


def test_a_model_with_daytime_traffic_forecast_is_active() -> None:
    servicer, forecasts = _night_scaler(PeakLoad(0.0))
    forecasts.by_model["llama"] = _day()
    with _served(servicer) as stub:
        assert stub.IsActive(_ref(model="llama")).result is True


def test_traffic_forecast_to_arrive_inside_the_lookahead_activates_the_model_ahead_of_it() -> None:
    servicer, forecasts = _night_scaler()
    # idle for eight minutes, then 5 rps: inside the ten-minute lookahead
    forecasts.by_model["llama"] = Forecast("llama", T0, 60, (0.0,) * 8 + (5.0,) * 4,
                                           (0.1,) * 8 + (6.5,) * 4, "hybrid")
    with _served(servicer) as stub:
        assert stub.IsActive(_ref(model="llama")).result is True
        assert stub.IsActive(_ref(model="llama", lookaheadSeconds="300")).result is False


def test_a_request_observed_in_the_night_activates_the_model_the_forecast_calls_idle() -> None:
    load = PeakLoad(1 / 300)  # one request in a five-minute rate window
    servicer, _ = _night_scaler(load)
    with _served(servicer) as stub:
        assert stub.IsActive(_ref(model="llama")).result is True
    assert load.asked_since == [T0 - timedelta(seconds=600)]  # over the last lookahead


def test_an_explicit_activation_target_rps_is_honoured_also_from_env() -> None:
    servicer, forecasts = _night_scaler(PeakLoad(0.5))
    forecasts.by_model["llama"] = _day()
    with _served(servicer) as stub:
        assert stub.IsActive(_ref(model="llama", activationTargetRps="10")).result is False
        assert stub.IsActive(_ref(model="llama", activationTargetRps="4")).result is True
        assert stub.IsActive(_ref(model="llama", activationTargetRpsFromEnv="10")).result is False
        forecasts.by_model["llama"] = _night()  # KEDA's own default: active above 0
        assert stub.IsActive(_ref(model="llama", activationTargetRps="0")).result is True


@pytest.mark.parametrize("value", ["-1", "soon", "nan"])
def test_an_invalid_activation_target_rps_is_invalid_argument_naming_the_key(value: str) -> None:
    servicer, _ = _night_scaler()
    with _served(servicer) as stub, pytest.raises(grpc.RpcError) as caught:
        stub.IsActive(_ref(model="llama", activationTargetRps=value))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "scalerMetadata.activationTargetRps" in (caught.value.details() or "")


@contextmanager
def _served(servicer: KedaScalerServicer) -> Iterator[pb_grpc.ExternalScalerStub]:
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.ExternalScalerStub(channel)
    finally:
        servicer.stopping.set()
        channel.close()
        stop(server, 0)


# -- metadata keys -------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "nearest"), [
    ("targetRPS", "targetRps"), ("lookahead", "lookaheadSeconds"), ("quantil", "quantile"),
    ("activationThreshold", "activationTargetRps")])
def test_a_misspelt_metadata_key_is_invalid_argument_naming_it_and_the_nearest_key(
        scaler: Scaler, key: str, nearest: str) -> None:
    stub, forecasts, _ = scaler
    forecasts.by_model["llama"] = _forecast("llama", (5.0, 5.0))
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetMetricSpec(_ref(model="llama", scalerAddress="headroom:50051", **{key: "5"}))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"scalerMetadata.{key} is not a key of Headroom's scaler (did you mean {nearest}?" in (
        caught.value.details() or "")


def test_kedas_own_trigger_keys_are_accepted_and_from_env_keys_stand_for_their_key(
        scaler: Scaler) -> None:
    stub, _, _ = scaler
    keda_keys = {"scalerAddress": "headroom:50051", "enableTLS": "true", "unsafeSsl": "false",
                 "caCert": "/ca.pem", "tlsClientCert": "/c.pem", "tlsClientKey": "/k.pem"}
    spec = stub.GetMetricSpec(_ref(model="llama", targetRpsFromEnv="12.5", **keda_keys))
    assert spec.metricSpecs[0].targetSizeFloat == 12.5
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetMetricSpec(_ref(model="llama", targetRps="10", targetRpsFromEnv="12.5"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == ("scalerMetadata.targetRps and "
                                      "scalerMetadata.targetRpsFromEnv are both given; give one")


@pytest.mark.parametrize(("metadata", "message"), [
    ({"targetRpsFromEnv": "FOO"}, "scalerMetadata.targetRpsFromEnv: 'FOO' is not a number"),
    ({"targetRpsFromEnv": "0.0004"}, "scalerMetadata.targetRpsFromEnv must be at least 0.001"),
    ({"lookaheadSecondsFromEnv": "-5"}, "scalerMetadata.lookaheadSecondsFromEnv must be > 0, "
                                        "got '-5'"),
    ({"quantileFromEnv": "0.3"}, "scalerMetadata.quantileFromEnv must be in [0.5, 1), got '0.3'"),
    ({"activationTargetRpsFromEnv": "soon"},
     "scalerMetadata.activationTargetRpsFromEnv: 'soon' is not a number"),
], ids=["target not a number", "target under a thousandth", "negative lookahead",
        "quantile below the median", "activation not a number"])
def test_a_bad_from_env_value_is_named_by_the_key_the_scaled_object_wrote(
        scaler: Scaler, metadata: dict[str, str], message: str) -> None:
    """KEDA forwards ``<key>FromEnv`` under that very key (its value resolved from the env):
    the operator must find the key they wrote in the error, not the one it stands for."""
    stub, _, _ = scaler
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetMetricSpec(_ref(model="llama", **metadata))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith(message)


@pytest.mark.parametrize("quantile", ["0", "-0.2", "0.3", "1", "nan"])
def test_a_quantile_out_of_range_is_refused_stating_the_range_whatever_the_value(
        scaler: Scaler, quantile: str) -> None:
    stub, _, _ = scaler
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetMetricSpec(_ref(model="llama", quantile=quantile))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == (f"scalerMetadata.quantile must be in [0.5, 1), got "
                                      f"{quantile!r}")


# -- streams -------------------------------------------------------------------------------

def test_keda_max_streams_of_the_settings_serve_both_streams_of_twenty_scaled_objects(
        tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'keda.db'}", migrate=True)
    model = DEMO_MODELS[0].name
    store.save_forecasts([_forecast(model, (5.0, 5.0))], computed_at=T0)
    # one KEDA (one caller) holds them all: its share raised to the whole pool, as where KEDA
    # alone reaches the scaler (mutual TLS); a quarter (the default) would serve 5 ScaledObjects
    settings = load_settings(None, placement={"listen": "127.0.0.1:0"},
                             autoscaling={"keda_max_streams": 40, "keda_poll_s": 0.05,
                                          "keda_caller_share": 1.0})
    servicer = keda_servicer(settings, store, VirtualClock(T0), DEMO_MODELS)
    out = io.StringIO()
    stop_api, _ = start_placement_api(settings, PlacementEngine(), [keda_registrar(servicer)],
                                      Console(file=out), stream_workers=servicer.max_streams)
    port = re.search(r"127\.0\.0\.1:(\d+)", out.getvalue())
    assert port is not None
    channel = grpc.insecure_channel(f"127.0.0.1:{port[1]}")
    stub = pb_grpc.ExternalScalerStub(channel)
    streams: list[Iterator[object]] = []
    try:  # each external-push ScaledObject opens StreamMetricSpec and StreamIsActive
        answers: list[object] = []
        for i in range(20):
            ref = pb.ScaledObjectRef(name=f"so-{i}", namespace="serving",
                                     scalerMetadata={"model": model})
            for call in (stub.StreamMetricSpec, stub.StreamIsActive):
                stream = call(ref, timeout=20)
                streams.append(stream)
                try:
                    answers.append(next(stream))
                except grpc.RpcError as error:
                    answers.append(error.code())
        assert servicer.max_streams == 40
        assert [a for a in answers if isinstance(a, grpc.StatusCode)] == []
        assert servicer.open_streams() == 40
    finally:
        for opened in streams:
            assert isinstance(opened, grpc.Future)
            opened.cancel()
        servicer.stopping.set()
        channel.close()
        stop_api()
        store.engine.dispose()


def test_one_address_without_credentials_holds_a_quarter_of_the_streams_by_default(
        tmp_path: Path) -> None:
    # before: a client without credentials (the scaler needs no token) opened every stream,
    # and KEDA's own StreamIsActive was refused RESOURCE_EXHAUSTED: no push from zero
    store = Store.open(f"sqlite:///{tmp_path / 'keda.db'}", migrate=True)
    model = DEMO_MODELS[0].name
    store.save_forecasts([_forecast(model, (5.0, 5.0))], computed_at=T0)
    settings = load_settings(None, placement={"listen": "127.0.0.1:0"},
                             autoscaling={"keda_max_streams": 8, "keda_poll_s": 0.05})
    servicer = keda_servicer(settings, store, VirtualClock(T0), DEMO_MODELS)
    ref = pb.ScaledObjectRef(name="so", namespace="serving", scalerMetadata={"model": model})
    opened: list[Any] = []
    try:
        with _scaler_api(servicer) as (stub, _channel):
            answers: list[object] = []
            for _ in range(3):  # one at a time: each answered before the next opens
                opened.append(stub.StreamIsActive(ref, timeout=20))
                try:
                    answers.append(next(opened[-1]).result)
                except grpc.RpcError as error:
                    answers.append((error.code(), error.details()))
            assert answers[:2] == [True, True]
            assert answers[2] == (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "address ipv4:127.0.0.1 already holds 2 streams of this scaler, the most one "
                "caller may hold (autoscaling.keda_caller_share 0.25 of its 8), so that no "
                "caller takes them all; poll IsActive instead (trigger type external), close "
                "one of its streams, or, for a KEDA with more external-push ScaledObjects (two "
                "streams each), raise autoscaling.keda_caller_share")
            assert servicer.open_streams() == 2
            for stream in opened:
                stream.cancel()
    finally:
        store.engine.dispose()


def test_keda_max_streams_must_be_above_zero_naming_the_setting() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, autoscaling={"keda_max_streams": 0})
    assert str(caught.value) == ("configuration: autoscaling.keda_max_streams: Input should be "
                                 "greater than 0, got 0")
    assert load_settings(None).autoscaling.keda_max_streams == 128  # 64 ScaledObjects


class FlakyForecasts(MemoryForecasts):
    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def latest_forecasts(self) -> Mapping[str, Forecast]:
        if self.down:
            raise ConnectionError("connection to 127.0.0.1:5432 refused")
        return super().latest_forecasts()


def test_a_stream_outlives_a_store_blip_and_sends_the_change_after_it(
        caplog: pytest.LogCaptureFixture) -> None:
    forecasts = FlakyForecasts()
    forecasts.by_model["llama"] = _day()
    servicer = KedaScalerServicer(forecasts, VirtualClock(T0), lookahead_s=600,
                                  target_rps={"llama": 20.0}, poll_s=0.05)
    with _served(servicer) as stub:
        stream = stub.StreamIsActive(_ref(model="llama"), timeout=10)
        assert next(stream).result is True
        forecasts.down = True
        time.sleep(0.5)  # some ten polls fail
        with forecasts.lock:
            forecasts.by_model["llama"] = _night()
        forecasts.down = False
        assert next(stream).result is False  # the same stream, not an UNAVAILABLE
        stream.cancel()
    skipped = [r for r in caplog.records if r.message == "keda.stream_update_skipped"]
    assert len(skipped) == 1  # logged once for the run of failures


def test_a_stream_still_ends_on_bad_metadata_and_on_an_error_before_its_first_answer(
        scaler: Scaler) -> None:
    stub, _, _ = scaler
    with pytest.raises(grpc.RpcError) as no_forecast:
        next(stub.StreamIsActive(_ref(model="llama"), timeout=10))
    assert no_forecast.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as bad:
        next(stub.StreamIsActive(_ref(model="llama", quantile="2"), timeout=10))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
