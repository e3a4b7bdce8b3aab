"""SQLModel tables: models, GPU inventory, forecasts, observations, placements, the audit trail
(ticks -> plans -> actions -> outcomes), GPU prices, the issued forecasts the live loop
calibrates from and the leases that let one process at a time drive a store's simulated fleet.
Times are stored as UTC."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from controlplane.store.utc import UtcDateTime

#: a Kubernetes node name has up to 253 characters; a MIG re-layout's id adds 16 (0010)
NODE_NAME_CHARS = 300


def _utc_column(index: bool = False) -> Column[datetime]:
    return Column(UtcDateTime(), nullable=False, index=index)


class ModelRecord(SQLModel, table=True):
    __tablename__ = "models"
    name: str = Field(primary_key=True, max_length=200)
    tenant: str = Field(max_length=100, index=True)
    isolation: str = Field(max_length=16)  # strict | trusted | none
    engine: str = Field(max_length=16)  # triton | vllm | sglang
    latency_slo_ms: float
    cold_start_p50_s: float
    cold_start_p90_s: float
    profile_json: str = Field(sa_column=Column(Text, nullable=False))
    # the models file's replica bounds (0022); None: no bound
    min_replicas: int | None = None
    max_replicas: int | None = None
    # `headroom models pause` (0022): paused while paused_at is set, its replicas held at
    # paused_replicas (None: at those observed each tick) until `headroom models resume`
    paused_replicas: int | None = None
    paused_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(),
                                                                      nullable=True))
    paused_by: str | None = Field(default=None, max_length=100)


class NodeRecord(SQLModel, table=True):
    __tablename__ = "nodes"
    name: str = Field(primary_key=True, max_length=NODE_NAME_CHARS)
    pool: str = Field(max_length=100, index=True)
    product: str = Field(max_length=64)
    ready: bool
    cordoned: bool = False
    cpu_milli: int
    memory_mib: int
    updated_at: datetime = Field(sa_column=_utc_column())


class GpuRecord(SQLModel, table=True):
    __tablename__ = "gpus"
    node: str = Field(primary_key=True, max_length=NODE_NAME_CHARS)
    index: int = Field(primary_key=True)
    product: str = Field(max_length=64, index=True)
    memory_mib: int
    mig_capable: bool
    sharing: str = Field(max_length=16)  # exclusive | mig | mps | time_sliced
    mig_layout: str = Field(default="", max_length=200)  # comma-separated MIG profiles


class ObservationRecord(SQLModel, table=True):
    """Per-model load and capacity at one instant: the requests that finished per second
    (``demand_rps``) and those that arrived (``arrivals_rps``: the history forecasts are
    scored against, and the demo's forecaster fits), and the latency measured then (mean or
    quantile, as configured; None: not measured): with the ready replicas, one sample of the
    model's throughput at its SLO (``controlplane.autoscaling.profile_correction``); and its
    queued requests and KV cache usage then (0027; None: not measured), drawn on the
    dashboard's Models page."""

    __tablename__ = "observations"
    # by model and time with the load, so the requests served per model and day are read from
    # the index alone (0025); by time alone: the profile samples every tick reads and the
    # retention's delete (0013)
    __table_args__ = (Index("ix_observations_model_at_load", "model", "at", "demand_rps",
                            "capacity_rps", "arrivals_rps"),
                      Index("ix_observations_at", "at"))
    id: int | None = Field(default=None, primary_key=True)
    model: str = Field(max_length=200)
    at: datetime = Field(sa_column=_utc_column())
    demand_rps: float
    capacity_rps: float
    replicas_ready: int
    latency_ms: float | None = None
    queued_requests: float | None = None
    kv_cache_usage: float | None = None  # 0-1
    # the requests that arrived (0030; None: as many as finished, ``demand_rps``: the growth of
    # the requests held was not measured): ``controlplane.store.arrivals``
    arrivals_rps: float | None = None


class ForecastRecord(SQLModel, table=True):
    __tablename__ = "forecasts"
    __table_args__ = (Index("ix_forecasts_model_computed", "model", "computed_at"),)
    id: int | None = Field(default=None, primary_key=True)
    model: str = Field(max_length=200)
    computed_at: datetime = Field(sa_column=_utc_column())
    origin_at: datetime = Field(sa_column=_utc_column())
    step_s: int
    p50_json: str = Field(sa_column=Column(Text, nullable=False))
    p90_json: str = Field(sa_column=Column(Text, nullable=False))
    method: str = Field(max_length=64)
    fallback_reason: str = Field(default="", max_length=200)
    backtest_wape: float | None = None
    # what was done to the model's history on the way (0023): a JSON list of lines; None: nothing
    notes_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class IssuedForecastRecord(SQLModel, table=True):
    """The first step of one forecast the reconcile loop acted on, and, once the step has
    passed, the mean observed rate over it (``controlplane.autoscaling.issued``)."""

    __tablename__ = "issued_forecasts"
    __table_args__ = (UniqueConstraint("model", "target_at", name="uq_issued_forecasts_model_at"),)
    id: int | None = Field(default=None, primary_key=True)
    model: str = Field(max_length=200)
    target_at: datetime = Field(sa_column=_utc_column(index=True))
    step_s: int
    p50_rps: float
    p90_rps: float
    sigma: float
    observed_rps: float | None = None
    scored_at: datetime | None = Field(
        default=None, sa_column=Column(UtcDateTime(), nullable=True))


class TickRecord(SQLModel, table=True):
    __tablename__ = "ticks"
    id: int | None = Field(default=None, primary_key=True)
    started_at: datetime = Field(sa_column=_utc_column(index=True))
    finished_at: datetime = Field(sa_column=_utc_column())
    status: str = Field(max_length=16)  # applied | dry_run | skipped | failed
    reason: str = Field(default="", max_length=200)
    gpus_ready: int = 0
    demand_rps: float = 0.0
    capacity_rps: float = 0.0
    observed_json: str = Field(sa_column=Column(Text, nullable=False))
    guard_memory_json: str = Field(sa_column=Column(Text, nullable=False))
    # each model's profile in use (offline and corrected, with the reason); None before 0005
    profiles_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # the process that wrote it: the Lease holder identity of the leading replica (0016;
    # None before, or when the writer did not say)
    writer: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # whether it read the fleet: observed_json's flag, kept beside it so a read of many ticks
    # does not extract it from each document (0026; None before: the document says)
    synced: bool | None = Field(default=None, sa_column=Column(Boolean, nullable=True))


class PlanRecord(SQLModel, table=True):
    __tablename__ = "plans"
    id: int | None = Field(default=None, primary_key=True)
    tick_id: int = Field(foreign_key="ticks.id", index=True)
    created_at: datetime = Field(sa_column=_utc_column())
    revision: int
    dry_run: bool
    cost_per_hour: float
    gpus_placed: int
    warm_gpus: int  # the fleet total
    unplaced_json: str = Field(sa_column=Column(Text, nullable=False))
    # product -> warm GPUs (0020); None on plans saved before: only the total is known
    warm_gpus_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    rendered: str = Field(sa_column=Column(Text, nullable=False))
    # the replicas running beyond the placement (0024: a JSON list of {model, tenant, product,
    # replicas, gpu_share}: kept by a guard over the target, or held while unplaced); None on
    # plans saved before: not known, showback bills their GPUs as idle as it did then
    kept_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class ActionRecord(SQLModel, table=True):
    __tablename__ = "actions"
    id: int | None = Field(default=None, primary_key=True)
    plan_id: int = Field(foreign_key="plans.id", index=True)
    ordinal: int
    kind: str = Field(max_length=32)  # scale_node_pool | set_replicas | skipped ...
    target: str = Field(max_length=NODE_NAME_CHARS)  # a pool, a model or a node
    from_value: int
    to_value: int
    reason: str = Field(max_length=200)
    skipped: bool = False


class OutcomeRecord(SQLModel, table=True):
    __tablename__ = "outcomes"
    id: int | None = Field(default=None, primary_key=True)
    action_id: int = Field(foreign_key="actions.id", index=True)
    ok: bool
    retryable: bool
    message: str = Field(sa_column=Column(Text, nullable=False))
    applied_at: datetime = Field(sa_column=_utc_column())


class PlacementRecord(SQLModel, table=True):
    """Segments of the plan of a tick: one row per replica slice."""

    __tablename__ = "placements"
    id: int | None = Field(default=None, primary_key=True)
    plan_id: int = Field(foreign_key="plans.id", index=True)
    model: str = Field(max_length=200, index=True)
    gpu_id: str = Field(max_length=200)
    product: str = Field(max_length=64)
    mode: str = Field(max_length=16)
    mig_profile: str = Field(default="", max_length=32)
    mig_start: int = 0
    compute_slices: int = 0
    throughput_rps: float = 0.0
    #: the model's tenant in the models table when the plan was stored (None: stored before
    #: 0011, the cost reader takes today's)
    tenant: str | None = Field(default=None, max_length=100)
    #: a replica of several GPUs (tensor parallel): its GPUs and this one's index among them
    #: (0028; a row written before: 1, 0)
    gpus: int = Field(default=1, sa_column_kwargs={"server_default": "1"})
    gpu_index: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class GpuPriceRecord(SQLModel, table=True):
    __tablename__ = "gpu_prices"
    product: str = Field(primary_key=True, max_length=64)
    price_per_gpu_hour: float
    source: str = Field(max_length=200)
    as_of: str = Field(max_length=32)


class GpuPriceHistoryRecord(SQLModel, table=True):
    """A product's price from ``effective_at`` on (None: since before anything was recorded,
    the prices in force at the 0012 upgrade); a row per change, appended by ``upsert_prices``."""

    __tablename__ = "gpu_price_history"
    id: int | None = Field(default=None, primary_key=True)
    product: str = Field(max_length=64, index=True)
    price_per_gpu_hour: float
    source: str = Field(max_length=200)
    as_of: str = Field(max_length=32)
    effective_at: datetime | None = Field(
        default=None, sa_column=Column(UtcDateTime(), nullable=True))


class LeaseRowRecord(SQLModel, table=True):
    """Who holds a lease (``controlplane.store.lease``); ``version`` grows with every write, so
    a write conditional on the version seen is a compare-and-swap (as ``resourceVersion``)."""

    __tablename__ = "leases"
    name: str = Field(primary_key=True, max_length=100)
    holder: str = Field(max_length=200)  # host-pid; "" = released
    acquired_at: datetime | None = Field(
        default=None, sa_column=Column(UtcDateTime(), nullable=True))
    renewed_at: datetime | None = Field(
        default=None, sa_column=Column(UtcDateTime(), nullable=True))
    duration_s: int
    transitions: int = 0
    version: int = 1


class GuardIntentRecord(SQLModel, table=True):
    """The guard memory the newest applying tick leaves if every change it planned is made,
    saved before it acts (0017; one row, ``slot`` 1, replaced each tick): a tick killed after
    acting and before its record is saved still holds its cooldowns and disruption budget
    (``controlplane.store.guard_intent``)."""

    __tablename__ = "guard_intents"
    slot: int = Field(default=1, primary_key=True)
    started_at: datetime = Field(sa_column=_utc_column())
    memory_json: str = Field(sa_column=Column(Text, nullable=False))
    writer: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # the newest tick record's id when it was saved (None: none): it counts while no record
    # was saved after it
    after_tick_id: int | None = None


class TickFenceRecord(SQLModel, table=True):
    """The fencing token of the replica that leads the tick records (0018; one row, ``name``
    "ticks"): each new leadership term claims the next token, and a tick record or intent is
    saved only under the newest one (``controlplane.store.tick_fence``)."""

    __tablename__ = "tick_fences"
    name: str = Field(primary_key=True, max_length=100)
    token: int = 0
    holder: str = Field(default="", max_length=200)
    claimed_at: datetime = Field(sa_column=_utc_column())
