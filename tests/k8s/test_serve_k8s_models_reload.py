"""``headroom models import`` / ``models remove`` while ``headroom serve --backend kubernetes``
leads: its next tick sizes the models as the store now lists them, without a restart (ticked
as serve's leader ticks, through ``leader_tick_on_current_models``, against the API test
server)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from apiserver import ApiServer
from k8s_builders import model_deployment
from k8s_harness import FixedLoads, client_for, leader_deps
from operator_scenario import LLAMA, LOADS, RESNET, SPECS, operator_settings, seed_operator_fleet
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner

from controlplane.adapters.k8s.backend import build_k8s_backend
from controlplane.adapters.prometheus import prometheus_source
from controlplane.cli import app
from controlplane.domain.actions import SetReplicas
from controlplane.domain.models import ModelSpec
from controlplane.domain.tick import TickReport
from controlplane.metrics import ControlPlaneMetrics
from controlplane.models_in_use import ModelsInUse
from controlplane.serve_k8s import forecast_history, leader_tick_on_current_models
from controlplane.settings_cluster import PrometheusSettings
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.model_digest import model_specs_digested
from controlplane.store.relayout import SqlRelayoutStore
from controlplane.store.status_reader import read_fleet_status


def _models_file(path: Path, specs: tuple[ModelSpec, ...]) -> Path:
    """``specs`` as a models file (JSON is YAML), as an operator writes it."""
    path.write_text(json.dumps({"models": [{
        "name": s.name, "tenant": s.tenant, "isolation": s.isolation.value,
        "engine": s.engine.value, "latency_slo_ms": s.latency_slo_ms,
        "cold_start": {"p50_s": s.cold_start.p50_s, "p90_s": s.cold_start.p90_s},
        "profile": [asdict(p) for p in s.profile],
        **({} if s.max_replicas is None else {"max_replicas": s.max_replicas}),
    } for s in specs]}))
    return path


def _headroom(db: Path, *args: str) -> str:
    run = CliRunner().invoke(app, ["models", *args, "--db", str(db)])
    assert run.exit_code == 0, run.output
    return run.output


class Serving:
    """``headroom serve``'s leader over ``store``: its models in use (which its reader
    observes, as run_serve_k8s wires them), its tick and its metrics."""

    def __init__(self, server: ApiServer, clock: VirtualClock, store: Store) -> None:
        settings = operator_settings()
        self.clock = clock
        digest, specs = model_specs_digested(store.engine)  # as run_serve_k8s starts
        self.models = ModelsInUse(settings, store.engine, digest, specs)
        self.backend = build_k8s_backend(
            settings, clock, SqlRelayoutStore(store.engine), api_client=client_for(server),
            identity="headroom-0", load=FixedLoads(LOADS), models=self.models.names)
        self.deps = leader_deps(self.backend, store, clock)
        self.registry = CollectorRegistry()
        self.metrics = ControlPlaneMetrics(self.registry)

    def tick(self) -> TickReport:
        self.backend.elector.try_acquire_or_renew(self.clock.now(), self.clock.monotonic())
        report = leader_tick_on_current_models(self.deps, self.models, self.backend.mig,
                                               self.metrics).report
        self.clock.advance(30)
        return report


def _bounded(max_replicas: int) -> tuple[ModelSpec, ...]:
    """The scenario's models, llama's replicas at most ``max_replicas``."""
    return tuple(replace(s, max_replicas=max_replicas) if s.name == LLAMA else s for s in SPECS)


def _replica_reasons(report: TickReport) -> dict[str, str]:
    """Each model's replica change the tick made, by its target's reason."""
    assert report.plan is not None
    return {a.model: a.reason for a in report.plan.actions if isinstance(a, SetReplicas)}


def test_an_imported_max_replicas_sets_the_next_ticks_target_and_a_removed_model_is_not_sized(
        apiserver: ApiServer, clock: VirtualClock, tmp_path: Path) -> None:
    seed_operator_fleet(apiserver)
    db = tmp_path / "headroom.db"
    store = Store.open(f"sqlite:///{db}", migrate=True)
    _headroom(db, "import", str(_models_file(tmp_path / "models.yaml", _bounded(3))))
    serving = Serving(apiserver, clock, store)
    first = serving.tick()  # observed load asks 7 replicas of llama
    assert _replica_reasons(first)[LLAMA] == "observed_load+max_replicas:3"
    assert {r.model for r in first.replicas} == {LLAMA, RESNET}

    _headroom(db, "import", str(_models_file(tmp_path / "wider.yaml", _bounded(5))))
    second = serving.tick()  # the same process: no restart
    assert _replica_reasons(second)[LLAMA] == "observed_load+max_replicas:5"
    assert [(r.target, r.max_replicas) for r in second.replicas if r.model == LLAMA] == [(5, 5)]

    _headroom(db, "remove", RESNET)
    third = serving.tick()
    assert {r.model for r in third.replicas} == {LLAMA}
    assert RESNET not in _replica_reasons(third)
    assert RESNET not in {d.model for d in third.demands}
    source = prometheus_source(PrometheusSettings(url="http://prometheus.invalid:9090"))
    assert forecast_history(source, serving.models).model_names() == [LLAMA]  # not forecast


def test_a_removed_model_still_deployed_is_named_unmanaged_not_observed_with_capacity_zero(
        apiserver: ApiServer, clock: VirtualClock, tmp_path: Path) -> None:
    seed_operator_fleet(apiserver)
    apiserver.seed(model_deployment("bert-t4"))  # labelled, never imported
    db = tmp_path / "headroom.db"
    store = Store.open(f"sqlite:///{db}", migrate=True)
    _headroom(db, "import", str(_models_file(tmp_path / "models.yaml", SPECS)))
    serving = Serving(apiserver, clock, store)

    def rps(model: str, kind: str) -> float | None:
        return serving.registry.get_sample_value("headroom_model_rps",
                                                 {"model": model, "kind": kind})

    serving.tick()
    assert rps(RESNET, "capacity") == LOADS[RESNET].capacity_rps
    assert rps("bert-t4", "capacity") is None

    _headroom(db, "remove", RESNET)  # its Deployment keeps serving
    report = serving.tick()
    assert [m.name for m in report.observed.models] == [LLAMA]
    # no sample for either: HeadroomModelShortOfCapacity cannot fire on them
    assert [rps(m, k) for m in (RESNET, "bert-t4") for k in ("observed", "capacity")] == [
        None] * 4
    assert [n for n in report.observed.notes if n.startswith("unmanaged: ")] == [
        "unmanaged: bert-t4 (Deployment models/bert-t4), resnet50-vision (Deployment "
        "models/resnet50-vision): labelled headroom.dev/model, not in the models table; "
        "Headroom neither measures, sizes nor scales them (`headroom models import` to manage "
        "one, or remove the label)"]
    status = read_fleet_status(store.engine, "test", "headroom-leader")
    assert [m.name for m in status.models] == [LLAMA]  # headroom status's rows
    assert status.last_tick is not None  # its totals: llama's demand against llama's capacity
    assert (status.last_tick.demand_rps, status.last_tick.capacity_rps) == (
        LOADS[LLAMA].demand_rps, LOADS[LLAMA].capacity_rps)
