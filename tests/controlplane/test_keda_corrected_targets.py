"""KEDA's default per-replica target follows the profile the reconcile loop corrected online
(the store's newest recorded profiles), so KEDA and the loop agree on what a replica serves."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
from tick_builders import sample_tick_report

from controlplane.adapters.keda import keda_registrar
from controlplane.adapters.keda_targets import CorrectedTargets
from controlplane.domain.profile import ProfileCorrection
from controlplane.runtime import keda_servicer
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from protos.externalscaler import externalscaler_pb2 as pb
from protos.externalscaler import externalscaler_pb2_grpc as pb_grpc
from scheduler.server import create_server, stop

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
MISTRAL, BERT = "mistral-7b-support", "bert-embed"
CORRECTED = (ProfileCorrection(MISTRAL, 18.0, 10.8, 0.6, 31, "over_slo: 12 of 31"),
             ProfileCorrection(BERT, 300.0, 300.0, 1.0, 0, "too_few_samples: 0 of 10"))


def _ref(model: str) -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(name=model, namespace="serving", scalerMetadata={"model": model})


def test_the_scalers_target_is_the_corrected_profile_times_the_target_utilization(
        tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'keda.db'}", migrate=True)
    store.save_tick(replace(sample_tick_report(), profiles=CORRECTED))
    settings = load_settings(None)
    util = settings.reconcile.target_utilization
    servicer = keda_servicer(settings, store, VirtualClock(T0), DEMO_MODELS)
    server, port = create_server("127.0.0.1:0", extra_servicers=[keda_registrar(servicer)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.ExternalScalerStub(channel)
    try:
        [mistral] = stub.GetMetricSpec(_ref(MISTRAL)).metricSpecs
        [bert] = stub.GetMetricSpec(_ref(BERT)).metricSpecs
        [llama] = stub.GetMetricSpec(_ref("llama-3-70b")).metricSpecs  # nothing recorded
    finally:
        channel.close()
        stop(server, 0)
    assert mistral.targetSizeFloat == 10.8 * util
    assert bert.targetSizeFloat == 300.0 * util
    assert llama.targetSizeFloat == 12.0 * util  # its offline profile


class Profiles:
    """A ProfileReader that counts its reads and fails while ``down``."""

    def __init__(self) -> None:
        self.reads = 0
        self.down = False
        self.profiles: tuple[ProfileCorrection, ...] = ()

    def last_profiles(self) -> tuple[ProfileCorrection, ...]:
        self.reads += 1
        if self.down:
            raise OSError("database is gone")
        return self.profiles


def test_targets_are_read_at_most_every_refresh_and_a_failed_read_keeps_the_last() -> None:
    clock, profiles = VirtualClock(T0), Profiles()
    targets = CorrectedTargets({MISTRAL: 18.0, BERT: 300.0}, 0.5, profiles, clock, refresh_s=30)
    assert targets.targets() == {MISTRAL: 9.0, BERT: 150.0}  # nothing recorded: offline
    profiles.profiles = CORRECTED
    clock.advance(10)
    assert targets.targets() == {MISTRAL: 9.0, BERT: 150.0} and profiles.reads == 1  # cached
    clock.advance(20)
    assert targets.targets() == {MISTRAL: 5.4, BERT: 150.0} and profiles.reads == 2
    profiles.down = True
    clock.advance(timedelta(minutes=5).total_seconds())
    assert targets.targets() == {MISTRAL: 5.4, BERT: 150.0} and profiles.reads == 3


def test_targets_follow_the_models_in_use_at_each_call_between_profile_reads() -> None:
    clock, profiles = VirtualClock(T0), Profiles()
    profiles.profiles = CORRECTED
    in_use = {MISTRAL: 18.0}
    targets = CorrectedTargets(lambda: in_use, 0.5, profiles, clock, refresh_s=30)
    assert targets.targets() == {MISTRAL: 5.4} and profiles.reads == 1
    in_use = {BERT: 300.0}  # `headroom models import` of bert, `models remove` of mistral
    assert targets.targets() == {BERT: 150.0} and profiles.reads == 1  # at once, not read again
