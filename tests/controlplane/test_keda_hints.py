"""KEDA's external scaler serves the forecasts the loop sizes with: a demand hint floors the
metric once its window is inside the scaler's lookahead, over real gRPC on loopback, from a real
SQLite store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc

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
    assert _metric(store, clock) == 5000.0
