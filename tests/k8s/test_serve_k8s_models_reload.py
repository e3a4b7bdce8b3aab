"""``headroom models import`` / ``models remove`` while ``headroom serve --backend kubernetes``
leads: its next tick sizes the models as the store now lists them, without a restart (ticked
as serve's leader ticks, through ``leader_tick_on_current_models``, against the API test
server)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from apiserver import ApiServer
from k8s_harness import FixedLoads, client_for, leader_deps
from operator_scenario import LLAMA, LOADS, RESNET, SPECS, operator_settings, seed_operator_fleet
from typer.testing import CliRunner

from controlplane.adapters.k8s.backend import build_k8s_backend
from controlplane.adapters.prometheus import prometheus_source
from controlplane.cli import app
from controlplane.domain.actions import SetReplicas
from controlplane.domain.models import ModelSpec
from controlplane.domain.tick import TickReport
from controlplane.models_in_use import ModelsInUse
from controlplane.serve_k8s import forecast_history, leader_tick_on_current_models
from controlplane.settings_cluster import PrometheusSettings
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.model_digest import model_specs_digested
from controlplane.store.relayout import SqlRelayoutStore


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
    """``headroom serve``'s leader over ``store``: its models in use and its tick."""

    def __init__(self, server: ApiServer, clock: VirtualClock, store: Store) -> None:
        settings = operator_settings()
        self.clock = clock
        self.backend = build_k8s_backend(
            settings, clock, SqlRelayoutStore(store.engine), api_client=client_for(server),
            identity="headroom-0", load=FixedLoads(LOADS))
        self.deps = leader_deps(self.backend, store, clock)
        digest, specs = model_specs_digested(store.engine)  # as run_serve_k8s starts
        self.models = ModelsInUse(settings, store.engine, digest, specs)

    def tick(self) -> TickReport:
        self.backend.elector.try_acquire_or_renew(self.clock.now(), self.clock.monotonic())
        report = leader_tick_on_current_models(self.deps, self.models, self.backend.mig,
                                               None).report
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
