"""Helpers shared by the Kubernetes tests: an official client bound to the test API server,
Headroom's Kubernetes backend wired to it (with a virtual clock), a fixed load source, and the
schema check of every object a test leaves on the server."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
from apiserver import KUBERNETES_VERSION, ApiServer
from fake_controllers import FakeMigManager
from k8s_builders import k8s_settings
from kubernetes import client

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.backend import K8sBackend, build_k8s_backend
from controlplane.adapters.placement import LocalPlacementClient
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ModelLoad, ObservedState
from controlplane.domain.tick import TickReport
from controlplane.ports import LoadSource, RelayoutStore
from controlplane.reconcile import ReconcileDeps
from controlplane.reconcile_config import reconcile_config
from controlplane.serve_k8s import leader_tick
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.fleet_pause import SqlFleetPause
from controlplane.store.ledger import SqlForecastLedger
from controlplane.store.relayout import MemoryRelayoutStore
from scheduler.engine import PlacementEngine

START_AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def client_for(server: ApiServer) -> client.ApiClient:
    return client.ApiClient(client.Configuration(host=server.url))


def make_backend(server: ApiServer, clock: VirtualClock, *, dry_run: bool = False,
                 identity: str = "headroom-0", relayouts: RelayoutStore | None = None,
                 api: KubeApi | None = None, load: LoadSource | None = None,
                 models: Callable[[], Collection[str]] | None = None,
                 **k8s: object) -> K8sBackend:
    """``models``: the models the models table lists (None: every labelled model)."""
    settings = k8s_settings(**k8s)
    if dry_run:
        settings = settings.model_copy(update={"safety": settings.safety.model_copy(
            update={"dry_run": True})})
    return build_k8s_backend(settings, clock, relayouts or MemoryRelayoutStore(),
                             api_client=client_for(server), identity=identity, api=api,
                             load=load, models=models)



def leading(server: ApiServer, clock: VirtualClock, **k8s: Any) -> K8sBackend:
    """``make_backend``'s backend, holding the Lease now (its actuators write)."""
    backend = make_backend(server, clock, **k8s)
    assert backend.elector.try_acquire_or_renew(clock.now())
    return backend

class FixedLoads:
    """A load source answering the same loads every time."""

    def __init__(self, loads: dict[str, ModelLoad]) -> None:
        self.loads = loads

    def measure(self, ready_replicas: Mapping[str, int], at: datetime) -> dict[str, ModelLoad]:
        return {m: load for m, load in self.loads.items() if m in ready_replicas}


NODEPOOL_SCHEMA = Path(__file__).parent / "schemas" / "karpenter-nodepool-v1.json"


def assert_schema_valid(server: ApiServer) -> int:
    nodepool_schema = json.loads(NODEPOOL_SCHEMA.read_text())
    checked = 0
    for api_version, kind, namespace in (
            ("v1", "Node", ""), ("v1", "Pod", ""), ("v1", "ConfigMap", ""),
            ("apps/v1", "Deployment", ""), ("apps/v1", "StatefulSet", ""),
            ("scheduling.k8s.io/v1", "PriorityClass", ""),
            ("policy/v1", "PodDisruptionBudget", ""), ("karpenter.sh/v1", "NodePool", "")):
        for obj in server.list(api_version, kind, namespace):
            if kind == "NodePool":
                jsonschema.validate(obj, nodepool_schema)
            else:
                kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            checked += 1
    return checked


def assert_pool_drift_noted(observed: ObservedState, pool: str, noted: str, target: int) -> None:
    """The reader noted ``pool``'s objects changed outside Headroom (``noted``) and marks its
    target of ``target`` nodes not intact, so the next tick writes it again."""
    assert [note for note in observed.notes if note.startswith(f"pool {pool}: ")] == [
        f"pool {pool}: {noted} for its target of {target} nodes (changed outside Headroom); "
        "writing the target again"]
    seen = observed.pool(pool)
    assert seen is not None and seen.target_nodes == target and not seen.target_intact


def leader_ticks(backend: K8sBackend, clock: VirtualClock, url: str, model: ModelSpec,
                 mig: FakeMigManager, *, ticks: int = 6, tick_s: float = 30.0
                 ) -> list[TickReport]:
    """``ticks`` leader ticks, ``tick_s`` apart, of a control plane managing ``model`` on
    ``backend`` (its store at ``url``), with the local placement engine; the fake MIG manager
    acts between ticks."""
    store = Store.open(url, migrate=True)
    store.upsert_models((model,))
    deps = leader_deps(backend, store, clock)
    config = reconcile_config(k8s_settings(), (model,))
    reports = []
    for _ in range(ticks):
        assert backend.elector.try_acquire_or_renew(clock.now())
        reports.append(leader_tick(deps, config, backend.mig, None).report)
        mig.react()
        clock.advance(tick_s)
    return reports


def leader_deps(backend: K8sBackend, store: Store, clock: VirtualClock) -> ReconcileDeps:
    """The reconcile loop of ``serve``'s leader on ``backend`` and ``store``: placing in process,
    laying nodes out (device-plugin sharing, MIG re-layouts) through the backend."""
    return ReconcileDeps(clock=clock, reader=backend.reader, node_pools=backend.node_pools,
                         replicas=backend.replicas,
                         placement=LocalPlacementClient(PlacementEngine()), forecasts=store,
                         decisions=store, history=store, ledger=SqlForecastLedger(store.engine),
                         sharing=backend.sharing, mig=backend.mig,
                         fleet_pause=SqlFleetPause(store.engine))
