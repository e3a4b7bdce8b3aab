"""The typed config ``headroom simulate`` runs on, as ``simulation.config`` loads it from a
models file: each model's replica shape, isolation, cold start (``ColdStartModel``), true
capacity, latency and replica bounds (``SimModel``), and the fleet's provisioning, node shapes
(``NodeShape``: one pool per GPU product), prices and GPU budgets (``FleetConfig``), together a
``SimConfig``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from controlplane.autoscaling.distribution import Durations
from controlplane.autoscaling.sizing import ReplicaShape
from controlplane.domain.models import Isolation

#: a model's latency SLO and unloaded mean latency, ms, when the models file gives none (the
#: simulated latency reaches the SLO exactly at the true per-replica throughput)
DEFAULT_LATENCY_SLO_MS = 1000.0
DEFAULT_UNLOADED_LATENCY_MS = 300.0


@dataclass(frozen=True, slots=True)
class ColdStartModel:
    """Model load + warm-up on a node that is up: with image and weights cached, or not."""

    cached: Durations
    uncached: Durations
    source: str
    samples_csv: Path | None = None  # the file the samples came from, if any


@dataclass(frozen=True, slots=True)
class SimModel:
    shape: ReplicaShape  # sized with: per_replica_rps is the offline profile
    isolation: Isolation
    cold_start: ColdStartModel
    #: what a replica really serves within the SLO (None: the profile is right)
    true_rps: float | None = None
    latency_slo_ms: float = DEFAULT_LATENCY_SLO_MS
    latency_ms: float = DEFAULT_UNLOADED_LATENCY_MS
    min_replicas: int | None = None  # the hot target's bounds (``autoscaling.bounds``)
    max_replicas: int | None = None
    #: how long replicas really take to start (None: ``cold_start``, which the policies plan with)
    true_cold: ColdStartModel | None = None

    @property
    def true_per_replica_rps(self) -> float:
        return self.shape.per_replica_rps if self.true_rps is None else self.true_rps

    @property
    def true_cold_start(self) -> ColdStartModel:
        """The cold start the simulated fleet draws."""
        return self.cold_start if self.true_cold is None else self.true_cold

    @property
    def name(self) -> str:
        return self.shape.model


@dataclass(frozen=True, slots=True)
class NodeShape:
    """The simulated pool of one GPU product: its name, GPUs a node and node bounds."""

    name: str
    gpus_per_node: int
    min_nodes: int
    max_nodes: int


@dataclass(frozen=True, slots=True)
class FleetConfig:
    node_provision: Durations
    gpus_per_node: int  # of a product without a pool of its own in ``pools``
    max_nodes: int  # likewise
    idle_wake_s: float
    prices: Mapping[str, float]
    cluster_gpu_budget: int | None = None
    tenant_gpu_budgets: Mapping[str, float] = field(default_factory=dict)
    pools: Mapping[str, NodeShape] = field(default_factory=dict)  # by GPU product

    def pool(self, product: str) -> NodeShape:
        """The pool of ``product``: its own, else the fleet's node size and bound."""
        return self.pools.get(product) or NodeShape(product.lower(), self.gpus_per_node, 0,
                                                     self.max_nodes)


@dataclass(frozen=True, slots=True)
class SimConfig:
    models: tuple[SimModel, ...]
    fleet: FleetConfig
    source: str
    #: keys of the file close to a known one (a misspelling whose value is not used), one line each
    warnings: tuple[str, ...] = ()

    def model(self, name: str) -> SimModel:
        return next(m for m in self.models if m.name == name)
