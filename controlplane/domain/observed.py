"""What the control plane sees of the world at one instant (pure values)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class ObservedGpu:
    index: int
    product: str
    memory_mib: int
    mig_capable: bool
    mig_layout: tuple[str, ...] = ()  # MIG profiles present, e.g. ("3g.40gb", "2g.20gb")
    sharing: str = "exclusive"
    sharing_replicas: int = 1  # clients per GPU of MPS / time-slicing (device-plugin config)
    # MIG mode on; instances imply it, but mig-parted's all-enabled turns it on with none (the
    # GPU then serves nothing: not a whole GPU)
    mig_enabled: bool = False

    def __post_init__(self) -> None:
        if self.mig_layout and not self.mig_enabled:
            object.__setattr__(self, "mig_enabled", True)


@dataclass(frozen=True, slots=True)
class ObservedNode:
    name: str
    pool: str
    product: str
    ready: bool
    cpu_milli: int
    memory_mib: int
    gpus: tuple[ObservedGpu, ...]
    cordoned: bool = False
    labels: tuple[tuple[str, str], ...] = ()
    gpu_pods: int = 0  # workload pods holding GPUs here (what a drain would evict)
    # GPUs with MIG off that those pods hold, whole or in part: Kubernetes counts the
    # ``nvidia.com/gpu`` units they request (an upper bound where the device plugin shares a GPU
    # among several units), capped at the node's GPUs with MIG off
    whole_gpus_in_use: int = 0
    # pods a drain leaves here (DaemonSet, static pods) that hold GPUs the GPU Operator's MIG
    # manager does not stop (relayout_gpu_pods.gpu_pods_in_the_way), as namespace/name: while
    # one runs, the node cannot be re-laid out and the planner passes it over
    undrained_gpu_pods: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ObservedPool:
    """A node pool of one GPU product: nodes ready, nodes still provisioning, its size target."""

    name: str
    product: str
    gpus_per_node: int
    nodes_ready: int
    nodes_pending: int
    target_nodes: int
    # False: the objects that hold the target (on Kubernetes the placeholder Deployment and the
    # NodePool's node limit) no longer match it, e.g. deleted or edited by someone else; the
    # planner writes the target again even when it wants no other size
    target_intact: bool = True
    # the GPUs its ready nodes and its nodes not ready yet report (on Kubernetes GPU Feature
    # Discovery's nvidia.com/gpu.count), what the cloud bills even where ``gpus_per_node``
    # says otherwise; None where nodes are not read one by one (the simulator, ticks stored
    # before they were kept): ``gpus_per_node`` per node
    gpus_ready_reported: int | None = None
    gpus_pending_reported: int | None = None

    @property
    def gpus_ready(self) -> int:
        """Its ready nodes' GPUs: as they report them, else ``gpus_per_node`` each."""
        if self.gpus_ready_reported is not None:
            return self.gpus_ready_reported
        return self.nodes_ready * self.gpus_per_node

    @property
    def gpus_billed(self) -> int:
        """The GPUs it pays for: its ready nodes' and those still provisioning, as they report
        them (else ``gpus_per_node`` each). Status, the metrics, the cost pages and the cost
        export all count these (``cost_reader.TickFacts`` reads them from the tick's record)."""
        pending = (self.gpus_pending_reported if self.gpus_pending_reported is not None
                   else self.nodes_pending * self.gpus_per_node)
        return self.gpus_ready + pending


@dataclass(frozen=True, slots=True)
class ServingWorkload:
    """A workload labelled with a model, as read: its kind and name (``Deployment models/chat``),
    the GPU resources each of its pods asks for (controlplane.domain.workload_slices checks
    them against the plan) and how its pods stop."""

    name: str
    gpu_requests: tuple[tuple[str, int], ...] = ()
    # how its pods stop (controlplane.domain.graceful_stop checks them against the model's SLO):
    # terminationGracePeriodSeconds, and whether a container has a preStop hook; None: not read
    stop_grace_s: float | None = None
    pre_stop: bool | None = None


@dataclass(frozen=True, slots=True)
class ObservedModel:
    """Replicas of one model and the load it sees now. ``demand_measured`` False: the load
    source could not say this tick (Prometheus down, no series); ``demand_rps`` is then 0 only
    as a placeholder, and nothing stores or sizes from it (``ObservedState.notes`` say why).
    ``latency_ms``: the request latency measured now (the mean, or the configured quantile:
    ``prometheus.latency_quantile``), None when not measured (never
    0 for unknown); with the load per ready replica it corrects the model's profile."""

    name: str
    replicas_ready: int
    replicas_pending: int
    replicas_target: int
    demand_rps: float
    capacity_rps: float
    demand_measured: bool = True
    latency_ms: float | None = None
    #: requests waiting in its replicas' queues (vLLM's not yet batched, Triton's not yet
    #: executing), None when not measured: load the completion rate ``demand_rps`` cannot show
    #: once the replicas are saturated (``DemandPolicy.queue_drain_s``)
    queued_requests: float | None = None
    #: how fast the requests its replicas hold (queued and, for vLLM and SGLang, running) grew
    #: over the rate window (requests/s, negative while they drain): the rate arrivals outran
    #: completions (``arrivals_rps``); None when not measured
    queue_growth_rps: float | None = None
    #: the KV cache its replicas' running requests hold (0-1, their mean; vLLM, SGLang), None
    #: when not measured: a model whose requests are long fills it before its request rate
    #: reaches the profile's (``DemandPolicy.kv_cache_target``)
    kv_cache_usage: float | None = None
    # every workload labelled with it, by name, as read (none when not read, as in the
    # simulator)
    workloads: tuple[ServingWorkload, ...] = ()
    #: its pods no node has bound yet (Pending, no nodeName: waiting for the scheduler or for
    #: room), None when not read; a bound pod still starting is pending, not unscheduled
    replicas_unscheduled: int | None = None

    @property
    def arrivals_rps(self) -> float:
        """The requests that arrived per second: those that finished (``demand_rps``) plus how
        fast the requests its replicas hold grew, not below 0, as its Prometheus history counts
        them (``forecaster.sources.promql``); what finished where the growth is not measured.
        A saturated engine finishes only what its capacity serves and queues the rest: its
        demand is what arrived, which is what its forecasts forecast, their calibration scores
        and its history, the dashboard and ``headroom status`` show."""
        return max(0.0, self.demand_rps + (self.queue_growth_rps or 0.0))


@dataclass(frozen=True, slots=True)
class ModelLoad:
    """What a load source (Prometheus) measured of one model: its request rate, None when it
    is unknown (``why`` says so), the capacity its ready replicas serve and its mean request
    latency, None when not measured."""

    demand_rps: float | None
    capacity_rps: float
    why: str = ""
    latency_ms: float | None = None
    sampled_at: datetime | None = None  # the newest sample the rate rests on (None: as measured)
    #: why the source can never date this rate ("" when it can), e.g. a custom PromQL query
    #: with no sample series: its staleness is not checked, and the tick's notes say so
    undated_why: str = ""
    #: requests waiting in its replicas' queues now (summed over them); None: not measured
    queued_requests: float | None = None
    #: how fast the requests they hold (queued, running) grew over the rate window (requests/s,
    #: negative while they drain); None: not measured
    queue_growth_rps: float | None = None
    #: the KV cache usage of its replicas now (0-1, their mean); None: not measured
    kv_cache_usage: float | None = None


@dataclass(frozen=True, slots=True)
class ObservedState:
    synced_at: datetime
    pools: tuple[ObservedPool, ...]
    nodes: tuple[ObservedNode, ...]
    models: tuple[ObservedModel, ...]
    synced: bool = True
    notes: tuple[str, ...] = field(default=())
    #: when the oldest input it holds was sampled (e.g. the newest sample behind a model's
    #: request rate), if older than ``synced_at``; None: all as of ``synced_at``
    data_at: datetime | None = None

    @property
    def oldest_at(self) -> datetime:
        """How old its data is: ``data_at`` if set, else ``synced_at``."""
        return self.synced_at if self.data_at is None else min(self.synced_at, self.data_at)

    def pool(self, name: str) -> ObservedPool | None:
        return next((p for p in self.pools if p.name == name), None)

    def model(self, name: str) -> ObservedModel | None:
        return next((m for m in self.models if m.name == name), None)

    def gpus_ready(self) -> int:
        return sum(p.gpus_ready for p in self.pools)

    def measured_load_rps(self) -> tuple[float, float]:
        """Demand (the requests that arrived: ``ObservedModel.arrivals_rps``) and the ready
        capacity serving it, summed over the models whose load was measured: a model whose
        load is unknown counts on neither side (its capacity against no demand would make the
        fleet look less loaded than it is)."""
        measured = [m for m in self.models if m.demand_measured]
        return sum(m.arrivals_rps for m in measured), sum(m.capacity_rps for m in measured)
