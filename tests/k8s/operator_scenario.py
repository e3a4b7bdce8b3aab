"""A fleet an operator runs, ticked the way ``headroom serve`` ticks it as the leader against
the API test server: the whole loop (replicas, pools, node sharing and MIG re-layouts), every
tick through ``leader_tick`` (which moves the re-layouts in flight on), recorded in a store."""

from __future__ import annotations

from apiserver import ApiServer
from k8s_builders import gpu_node, k8s_settings, model_deployment, nodepool
from k8s_harness import FixedLoads, client_for, leader_deps

from controlplane.adapters.k8s.backend import K8sBackend, build_k8s_backend
from controlplane.domain.observed import ModelLoad
from controlplane.domain.tick import TickReport
from controlplane.reconcile_config import reconcile_config
from controlplane.serve_k8s import leader_tick
from controlplane.settings import Settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.relayout import SqlRelayoutStore

LLAMA, RESNET = "llama-3-8b-chat", "resnet50-vision"
SPECS = tuple(s for s in DEMO_MODELS if s.name in (LLAMA, RESNET))
LOADS = {LLAMA: ModelLoad(200.0, 40.0), RESNET: ModelLoad(900.0, 250.0)}


def operator_settings(dry_run: bool = False, **k8s: object) -> Settings:
    base = k8s_settings(**k8s)
    return base.model_copy(update={
        "autoscaling": base.autoscaling.model_copy(update={"policy": "reactive"}),
        "safety": base.safety.model_copy(update={"dry_run": dry_run})})


def seed_operator_fleet(server: ApiServer) -> None:
    server.seed(nodepool("a100-80gb"))
    server.seed(nodepool("l4", gpu_name="l4"))
    server.seed(gpu_node("a100-1"))
    server.seed(model_deployment(LLAMA))
    server.seed(model_deployment(RESNET))


class Leader:
    """One ``headroom serve`` leader: its backend, store and config, ticked 30 s apart."""

    def __init__(self, server: ApiServer, clock: VirtualClock, store: Store,
                 settings: Settings, loads: dict[str, ModelLoad] | None = None) -> None:
        self.clock = clock
        self.store = store
        self.backend: K8sBackend = build_k8s_backend(
            settings, clock, SqlRelayoutStore(store.engine), api_client=client_for(server),
            identity="headroom-0", load=FixedLoads(loads or LOADS))
        store.upsert_models(SPECS)
        self.deps = leader_deps(self.backend, store, clock)
        self.config = reconcile_config(settings, SPECS)

    def tick(self) -> TickReport:
        self.backend.elector.try_acquire_or_renew(self.clock.now(), self.clock.monotonic())
        report = leader_tick(self.deps, self.config, self.backend.mig, None).report
        self.clock.advance(30)
        return report


def first_target(server: ApiServer, clock: VirtualClock, url: str, settings: Settings,
                 loads: dict[str, ModelLoad], model: str) -> tuple[int, str]:
    """The replica target a new leader's first tick (on a new store at ``url``, seeing
    ``loads``) wants for ``model``, before the guards pace the way there, and its demand's
    reason."""
    report = Leader(server, clock, Store.open(url, migrate=True), settings, loads).tick()
    assert report.plan is not None, report.reason
    (wanted,) = [r for r in report.replicas if r.model == model]
    (demand,) = [d for d in report.demands if d.model == model]
    return wanted.target, demand.reason
