"""Helpers shared by the Kubernetes tests: an official client bound to the test API server and
Headroom's Kubernetes backend wired to it (with a virtual clock)."""

from __future__ import annotations

from datetime import UTC, datetime

from apiserver import ApiServer
from k8s_builders import k8s_settings
from kubernetes import client

from controlplane.adapters.k8s.api import KubeApi
from controlplane.adapters.k8s.backend import K8sBackend, build_k8s_backend
from controlplane.ports import LoadSource, RelayoutStore
from controlplane.sim.clock import VirtualClock
from controlplane.store.relayout import MemoryRelayoutStore

START_AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def client_for(server: ApiServer) -> client.ApiClient:
    return client.ApiClient(client.Configuration(host=server.url))


def make_backend(server: ApiServer, clock: VirtualClock, *, dry_run: bool = False,
                 identity: str = "headroom-0", relayouts: RelayoutStore | None = None,
                 api: KubeApi | None = None, load: LoadSource | None = None,
                 **k8s: object) -> K8sBackend:
    settings = k8s_settings(**k8s)
    if dry_run:
        settings = settings.model_copy(update={"safety": settings.safety.model_copy(
            update={"dry_run": True})})
    return build_k8s_backend(settings, clock, relayouts or MemoryRelayoutStore(),
                             api_client=client_for(server), identity=identity, api=api,
                             load=load)
