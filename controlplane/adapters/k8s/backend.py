"""Wiring of the Kubernetes backend: one API client, the reader, the actuators (gated on the
leader Lease) and the elector. ``headroom serve`` with ``backend: kubernetes`` builds this.

    backend = build_k8s_backend(settings, clock, SqlRelayoutStore(store.engine))
    every tick:
        leading = backend.elector.try_acquire_or_renew(clock.now(), clock.monotonic())
        reconcile_once(ReconcileDeps(..., reader=backend.reader,
                                     node_pools=backend.node_pools,
                                     replicas=backend.replicas, ...), config)
        if leading: backend.mig.advance()        # moves MIG relayouts on
        if leading: backend.guard_loading()      # do-not-disrupt on loading model pods
    on shutdown: backend.elector.release()

Followers still read and serve; their gated actuators answer ``not_leader`` (retryable) and
write nothing. With ``safety.dry_run`` every write is recorded (``backend.planned_writes()``)
instead of sent, and the replica neither takes nor contends for the Lease.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import yaml
from kubernetes import client, config

from controlplane.actuation import Actuators
from controlplane.adapters.k8s.api import KubeApi, PlannedWrite
from controlplane.adapters.k8s.leader import DryRunElector, K8sLeaseElector, LeaderGated
from controlplane.adapters.k8s.loading_guard import K8sLoadingGuard
from controlplane.adapters.k8s.mig import K8sMigRelayoutActuator, surge_floors
from controlplane.adapters.k8s.node_pools import K8sNodePoolActuator
from controlplane.adapters.k8s.reader import K8sClusterReader
from controlplane.adapters.k8s.replicas import K8sReplicaActuator
from controlplane.adapters.k8s.sharing import K8sSharingActuator
from controlplane.domain.desired import PoolSpec
from controlplane.domain.lease import LeaseTiming
from controlplane.domain.loading_guard import GuardSync
from controlplane.domain.mig_relayout import RelayoutPolicy
from controlplane.identity import holder_identity
from controlplane.ports import Clock, LeaderElector, LoadSource, RelayoutStore
from controlplane.settings import KubernetesSettings, Settings, pool_specs


@dataclass(frozen=True, slots=True)
class K8sBackend:
    api: KubeApi
    reader: K8sClusterReader
    node_pools: LeaderGated
    replicas: LeaderGated
    sharing: LeaderGated
    mig: LeaderGated
    elector: LeaderElector
    relayouts: RelayoutStore
    identity: str  # this replica's Lease holder identity: the writer of the ticks it records
    # the loading guard's sync, gated on the Lease: an empty GuardSync when not leading
    guard_loading: Callable[[], GuardSync]

    @property
    def actuators(self) -> Actuators:
        return Actuators(self.node_pools, self.replicas, self.sharing, self.mig)

    def planned_writes(self) -> tuple[PlannedWrite, ...]:
        """What a dry run would have written, in order."""
        return self.api.planned_writes()


_load_kube_config: Callable[..., None] = config.load_kube_config
_load_incluster_config: Callable[..., None] = config.load_incluster_config
# Missing, unreadable, not YAML, or not shaped like a kubeconfig (the loader indexes it blindly).
_BAD_KUBECONFIG = (config.ConfigException, yaml.YAMLError, OSError, TypeError, KeyError,
                   ValueError, AttributeError)


class KubeconfigError(Exception):
    """No usable Kubernetes client configuration; the message names the file and the setting."""


def api_client_from(settings: KubernetesSettings) -> client.ApiClient:
    """In-cluster config when running in a pod, else the kubeconfig (settings or default).
    Raises KubeconfigError when neither can be loaded."""
    configuration = client.Configuration()
    if settings.kubeconfig:
        try:
            _load_kube_config(config_file=settings.kubeconfig, client_configuration=configuration)
        except _BAD_KUBECONFIG as error:
            raise KubeconfigError(f"kubeconfig {settings.kubeconfig} (k8s.kubeconfig): "
                                  f"{_one_line(error)}") from None
        return client.ApiClient(configuration)
    try:
        _load_incluster_config(client_configuration=configuration)
    except config.ConfigException as not_in_pod:
        default = os.environ.get("KUBECONFIG") or "~/.kube/config"
        try:
            _load_kube_config(client_configuration=configuration)
        except _BAD_KUBECONFIG as error:
            raise KubeconfigError(
                f"no Kubernetes config: not in a pod ({_one_line(not_in_pod)}) and kubeconfig "
                f"{default} (KUBECONFIG, or set k8s.kubeconfig): {_one_line(error)}") from None
    return client.ApiClient(configuration)


def _one_line(error: Exception) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


def build_k8s_backend(settings: Settings, clock: Clock, relayouts: RelayoutStore, *,
                      api_client: client.ApiClient | None = None, identity: str | None = None,
                      load: LoadSource | None = None,
                      pools: Sequence[PoolSpec] | None = None,
                      api: KubeApi | None = None,
                      models: Callable[[], Collection[str]] | None = None) -> K8sBackend:
    """``api`` (or ``api_client``) overrides the client built from ``settings.k8s``;
    ``models``: the models the models table lists, read at each snapshot (a workload labelled
    with another is left out of it: ``K8sClusterReader``); None: every labelled model."""
    k8s = settings.k8s
    dry_run = settings.safety.dry_run
    if api is None:
        api = KubeApi(api_client or api_client_from(k8s), k8s.field_manager,
                      k8s.request_timeout_s, dry_run=dry_run)
    pool_list = tuple(pools) if pools is not None else pool_specs(settings)
    reader = K8sClusterReader(api, k8s, pool_list, clock, load,
                              settings.reconcile.max_staleness_s, models=models)
    node_pools = K8sNodePoolActuator(api, k8s, pool_list, lambda: surge_floors(relayouts))
    policy = RelayoutPolicy(k8s.surge_timeout_s, k8s.drain_timeout_s, k8s.mig_timeout_s,
                            k8s.relayout_retry_after_s, k8s.config_propagation_s)
    mig = K8sMigRelayoutActuator(api, k8s, pool_list, reader, node_pools, relayouts, clock,
                                 policy)
    elector: LeaderElector
    elector_type = DryRunElector if dry_run else K8sLeaseElector
    identity = identity or k8s.identity or holder_identity()
    elector = elector_type(api, k8s.namespace, k8s.lease_name, identity,
                           LeaseTiming(k8s.lease_duration_s, k8s.renew_deadline_s))
    gated = LeaderGated(elector, clock, node_pools, K8sReplicaActuator(api, k8s),
                        K8sSharingActuator(api, k8s, clock), mig)
    guard = K8sLoadingGuard(api, k8s, clock, models)
    return K8sBackend(api, reader, gated, gated, gated, gated, elector, relayouts, identity,
                      lambda: gated.gated(guard.sync, GuardSync()))
