"""KEDA's external scaler honours the models file's replica bounds and ``headroom models pause``,
over real gRPC on loopback: a paused model is served exactly its held replicas whatever its
forecast, a bounded one a metric whose replicas lie within its bounds, read at every call."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

import grpc
import pytest
from test_keda import T0, MemoryForecasts, _forecast, _night, _ref, _served

from controlplane.adapters.keda import KedaScalerServicer, keda_registrar
from controlplane.adapters.keda_limits import StoredLimits
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.domain.pause import ModelPause
from controlplane.runtime import keda_servicer
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.pauses import SqlModelPauses
from protos.externalscaler import externalscaler_pb2 as pb
from protos.externalscaler import externalscaler_pb2_grpc as pb_grpc
from scheduler.server import create_server, stop

TARGET = 40.0


@dataclass
class MemoryLimits:
    """Stands in for the models table: pauses, bounds and the newest tick's observed state."""

    pauses: list[ModelPause] = field(default_factory=list)
    bounds: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    observed: ObservedState | None = None
    down: bool = False

    def paused_models(self) -> Sequence[ModelPause]:
        if self.down:
            raise OSError("connection refused")
        return tuple(self.pauses)

    def replica_bounds(self, model: str) -> tuple[int | None, int | None]:
        return self.bounds.get(model, (None, None))

    def last_observed(self) -> ObservedState | None:
        return self.observed


def _scaler(p90: tuple[float, ...] | None = (100.0, 100.0, 100.0)
            ) -> tuple[KedaScalerServicer, MemoryForecasts, MemoryLimits]:
    forecasts, store = MemoryForecasts(), MemoryLimits()
    if p90 is not None:
        forecasts.by_model["llama"] = _forecast("llama", p90)
    clock = VirtualClock(T0)
    servicer = KedaScalerServicer(forecasts, clock, lookahead_s=180,
                                  target_rps={"llama": TARGET}, poll_s=0.05,
                                  limits=StoredLimits(store, store, store, clock))
    return servicer, forecasts, store


def _metric(stub: pb_grpc.ExternalScalerStub, **metadata: str) -> pb.MetricValue:
    (value,) = stub.GetMetrics(pb.GetMetricsRequest(
        scaledObjectRef=_ref(model="llama", **metadata))).metricValues
    return value


def _replicas(value: pb.MetricValue, target: float = TARGET) -> int:
    """The replicas KEDA's HPA asks for: ceil(metric / target), both in thousandths."""
    return -(-int(value.metricValueFloat * 1000) // int(target * 1000))


def _pause(replicas: int | None, model: str = "llama") -> ModelPause:
    return ModelPause(model, replicas, T0 - timedelta(minutes=5), "alice")


def _observed(replicas_target: int, synced_at: datetime = T0) -> ObservedState:
    return ObservedState(synced_at, (), (), (ObservedModel("llama", replicas_target, 0,
                                                           replicas_target, 3.0, 120.0),))


def test_a_model_paused_at_n_is_served_exactly_n_replicas_whatever_its_forecast() -> None:
    servicer, forecasts, store = _scaler((900.0, 900.0, 900.0))  # 23 replicas of 40 rps
    store.pauses.append(_pause(3))
    with _served(servicer) as stub:
        value = _metric(stub)
        assert _replicas(value) == 3 and math.ceil(value.metricValueFloat / TARGET) == 3
        assert value.metricValueFloat == pytest.approx(3 * TARGET)
        assert stub.IsActive(_ref(model="llama")).result is True
        del forecasts.by_model["llama"]  # a paused model's forecast is not even read
        assert _replicas(_metric(stub)) == 3


def test_a_pause_at_a_target_float_rounding_would_overshoot_still_asks_for_n_not_n_plus_one(
        ) -> None:
    servicer, _, store = _scaler()
    store.pauses.append(_pause(3))
    with _served(servicer) as stub:
        value = _metric(stub, targetRps="0.1")
        assert math.ceil(value.metricValueFloat / 0.1) == 3
        assert _replicas(value, 0.1) == 3


def test_a_model_paused_at_zero_is_inactive_and_served_zero_though_traffic_is_forecast() -> None:
    servicer, _, store = _scaler()
    store.pauses.append(_pause(0))
    with _served(servicer) as stub:
        value = _metric(stub)
        assert (value.metricValueFloat, value.metricValue) == (0.0, 0)
        assert stub.IsActive(_ref(model="llama")).result is False


def test_a_pause_of_another_model_leaves_this_one_on_its_forecast() -> None:
    servicer, _, store = _scaler()
    store.pauses.append(_pause(1, model="mistral"))
    with _served(servicer) as stub:
        assert _metric(stub).metricValueFloat == pytest.approx(100.0)


def test_a_pause_without_a_count_holds_the_replicas_the_newest_tick_observed() -> None:
    servicer, _, store = _scaler((900.0, 900.0, 900.0))
    store.pauses.append(_pause(None))
    store.observed = _observed(5, T0 - timedelta(seconds=30))
    with _served(servicer) as stub:
        assert _replicas(_metric(stub)) == 5
        assert stub.IsActive(_ref(model="llama")).result is True


@pytest.mark.parametrize(("observed", "why"), [
    (None, "no recorded tick observed its workload"),
    (_observed(5, T0 - timedelta(hours=1)), "the newest recorded tick observed it 3600s ago"),
], ids=["no tick", "an old tick"])
def test_a_pause_without_a_count_whose_replicas_are_unknown_fails_naming_the_pause(
        observed: ObservedState | None, why: str) -> None:
    servicer, _, store = _scaler()
    store.pauses.append(_pause(None))
    store.observed = observed
    with _served(servicer) as stub:
        for call in (lambda: _metric(stub), lambda: stub.IsActive(_ref(model="llama"))):
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            details = caught.value.details() or ""
            assert "model 'llama' is paused since" in details and "by alice" in details
            assert why in details and "--replicas N" in details


@pytest.mark.parametrize(("p90", "low", "high", "replicas"), [
    (10.0, 4, None, 4),  # 1 replica of forecast, raised to min_replicas
    (900.0, None, 6, 6),  # 23 replicas of forecast, capped at max_replicas
    (0.0, 2, 8, 2),
    (200.0, 2, 8, 5),  # within the bounds: the forecast as it is
], ids=["raised to min", "capped at max", "zero raised to min", "within"])
def test_the_metric_asks_for_replicas_within_the_models_bounds(
        p90: float, low: int | None, high: int | None, replicas: int) -> None:
    servicer, _, store = _scaler((p90,) * 3)
    store.bounds["llama"] = (low, high)
    with _served(servicer) as stub:
        value = _metric(stub)
        assert _replicas(value) == replicas
        assert math.ceil(value.metricValueFloat / TARGET) == replicas


def test_a_forecast_within_the_bounds_is_served_unchanged() -> None:
    servicer, _, store = _scaler((200.0,) * 3)
    store.bounds["llama"] = (2, 8)
    with _served(servicer) as stub:
        assert _metric(stub).metricValueFloat == pytest.approx(200.0)


def test_min_replicas_above_zero_keeps_a_model_idle_all_night_active() -> None:
    servicer, forecasts, store = _scaler(None)
    forecasts.by_model["llama"] = _night()
    with _served(servicer) as stub:
        assert stub.IsActive(_ref(model="llama")).result is False
        store.bounds["llama"] = (1, None)
        assert stub.IsActive(_ref(model="llama")).result is True


def test_the_stream_is_active_follows_a_pause_and_a_resume_on_its_next_poll() -> None:
    servicer, _, store = _scaler()
    with _served(servicer) as stub:
        stream = stub.StreamIsActive(_ref(model="llama"), timeout=10)
        assert next(stream).result is True
        store.pauses.append(_pause(0))
        assert next(stream).result is False
        store.pauses.clear()
        assert next(stream).result is True
        stream.cancel()


def test_a_store_down_for_pauses_is_unavailable_naming_the_model() -> None:
    servicer, _, store = _scaler()
    store.down = True
    with _served(servicer) as stub, pytest.raises(grpc.RpcError) as caught:
        _metric(stub)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "replica bounds and pause cannot be read for model 'llama'" in (
        caught.value.details() or "")


def test_the_servers_scaler_reads_pauses_and_bounds_from_the_store_at_every_call(
        tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'keda.db'}", migrate=True)
    store.upsert_models(DEMO_MODELS)
    model = DEMO_MODELS[0].name
    store.save_forecasts([_forecast(model, (900.0,) * 3)], computed_at=T0)
    servicer = keda_servicer(load_settings(None), store, VirtualClock(T0), DEMO_MODELS)
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    ref = pb.ScaledObjectRef(name=model, namespace="serving",
                             scalerMetadata={"model": model, "targetRps": "40"})
    try:
        stub = pb_grpc.ExternalScalerStub(channel)

        def replicas() -> int:
            (value,) = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref)).metricValues
            return _replicas(value)

        assert replicas() == 23
        pauses = SqlModelPauses(store.engine)
        assert pauses.pause(model, 2, T0, "alice")
        assert replicas() == 2
        pauses.resume(model)
        store.upsert_models([replace(DEMO_MODELS[0], max_replicas=10)])
        assert replicas() == 10
    finally:
        servicer.stopping.set()
        channel.close()
        stop(server, 0)
        store.engine.dispose()
