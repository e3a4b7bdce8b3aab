"""KEDA's external scaler serves the forecasts the loop sizes with: a demand hint floors the
metric once its window is inside the scaler's lookahead, over real gRPC on loopback, from a real
SQLite store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest

from controlplane.adapters.keda import keda_registrar
from controlplane.domain.hints import DemandHint
from controlplane.runtime import keda_servicer
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.hints import SqlDemandHints
from forecaster.types import Forecast
from protos.externalscaler import externalscaler_pb2 as pb
from protos.externalscaler import externalscaler_pb2_grpc as pb_grpc
from scheduler.server import create_server, stop

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
BERT = "bert-embed"


def _metric(store: Store, clock: VirtualClock) -> float:
    servicer = keda_servicer(load_settings(None), store, clock, DEMO_MODELS)
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    ref = pb.ScaledObjectRef(name=BERT, namespace="serving", scalerMetadata={"model": BERT})
    try:
        reply = pb_grpc.ExternalScalerStub(channel).GetMetrics(
            pb.GetMetricsRequest(scaledObjectRef=ref))
    finally:
        channel.close()
        stop(server, 0)
    return float(reply.metricValues[0].metricValueFloat)


def test_the_scalers_metric_is_floored_by_a_hint_from_its_lead_on(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'keda.db'}", migrate=True)
    store.save_forecasts([Forecast(BERT, T0, 60, (800.0,) * 20, (900.0,) * 20, "hybrid")], T0)
    clock = VirtualClock(T0)
    assert _metric(store, clock) == 900.0
    # a launch at 5,000 rps in 15 minutes: inside GetMetrics' 10-minute lookahead from T0 + 5
    # (KEDA's lookahead is its lead; the loop's hint lead is not added to it)
    SqlDemandHints(store.engine).add_hint(DemandHint(
        BERT, 5000.0, T0 + timedelta(minutes=15), T0 + timedelta(hours=1), "launch"), T0)
    assert _metric(store, clock) == 900.0
    clock.advance(6 * 60)
    # the forecast's p90 spread (900 / 800) on top of the hint: 5,000 x 1.125
    assert _metric(store, clock) == pytest.approx(5625.0)


def _no_observations_store(tmp_path: Path) -> Store:
    """A store whose only forecast of the model is the forecaster's zeros for "no data"."""
    store = Store.open(f"sqlite:///{tmp_path / 'keda.db'}", migrate=True)
    store.save_forecasts([Forecast(BERT, T0, 60, (0.0,) * 20, (0.0,) * 20, "persistence",
                                   fallback_reason="no_observations")], T0)
    return store


def _active_and_metric(store: Store, clock: VirtualClock) -> tuple[bool, float]:
    """IsActive and GetMetrics of the server's scaler, over real gRPC."""
    servicer = keda_servicer(load_settings(None), store, clock, DEMO_MODELS)
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    ref = pb.ScaledObjectRef(name=BERT, namespace="serving", scalerMetadata={"model": BERT})
    try:
        stub = pb_grpc.ExternalScalerStub(channel)
        active = stub.IsActive(ref).result
        reply = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref))
    finally:
        channel.close()
        stop(server, 0)
    return active, float(reply.metricValues[0].metricValueFloat)


def _refusal(store: Store, clock: VirtualClock) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as caught:
        _active_and_metric(store, clock)
    return caught.value.code(), caught.value.details() or ""


def test_a_model_without_observations_is_served_its_launch_hint_and_is_active(
        tmp_path: Path) -> None:
    store = _no_observations_store(tmp_path)
    SqlDemandHints(store.engine).add_hint(DemandHint(
        BERT, 300.0, T0 + timedelta(minutes=5), T0 + timedelta(hours=1), "launch"), T0)
    assert _active_and_metric(store, VirtualClock(T0)) == (True, 300.0)


def test_a_model_without_observations_and_no_hint_in_the_lookahead_stays_refused(
        tmp_path: Path) -> None:
    store = _no_observations_store(tmp_path)
    code, details = _refusal(store, VirtualClock(T0))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "without any observation" in details
    # a launch 15 minutes out is beyond the scaler's 10-minute lookahead: nothing to serve yet
    SqlDemandHints(store.engine).add_hint(DemandHint(
        BERT, 300.0, T0 + timedelta(minutes=15), T0 + timedelta(hours=1), "launch"), T0)
    code, details = _refusal(store, VirtualClock(T0))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "without any observation" in details


def test_a_hint_of_zero_rps_does_not_make_a_model_without_observations_served(
        tmp_path: Path) -> None:
    store = _no_observations_store(tmp_path)
    SqlDemandHints(store.engine).add_hint(DemandHint(
        BERT, 0.0, T0, T0 + timedelta(hours=1), "nothing"), T0)
    code, details = _refusal(store, VirtualClock(T0))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "without any observation" in details
