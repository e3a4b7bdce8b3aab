"""Settings groups: the typed sections of ``Settings`` (``db``, ``reconcile``, ``forecast``, ...),
each refusing unknown keys, inf/nan and YAML booleans where a number is meant."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from controlplane.autoscaling.cost_ratios import SHORT_MINUTE_COST_RATIO, SHORTFALL_COST_RATIO
from controlplane.autoscaling.policies import MAX_FORECAST_AGE_S
from controlplane.autoscaling.profile_correction import CorrectionConfig
from controlplane.domain.url_secrets import masked
from controlplane.yaml_numbers import NoBoolForANumber
from scheduler.domain import catalog
from scheduler.domain.validate import MAX_GPUS_PER_NODE, MAX_PRICE_PER_GPU_HOUR
from scheduler.stream_shares import DEFAULT_CALLER_SHARE


class Group(NoBoolForANumber):
    # no setting means "forever": an inf or nan would pass gt=0 and overflow (or never fire) later
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_DB_URL = re.compile(r"[A-Za-z][\w+]*://")  # SQLAlchemy's dialect[+driver]://

#: the URL schemes the store opens (``make_engine``): SQLite's built-in driver, and PostgreSQL
#: with psycopg 3 (``postgresql://`` and ``postgres://`` are opened with it); any other would
#: fail only when the store is opened, or its connections would miss the response bound
DB_URL_SCHEMES = ("sqlite", "sqlite+pysqlite", "postgresql", "postgres", "postgresql+psycopg")


class DbSettings(Group):
    url: str = Field("sqlite:///headroom.db", description="SQLAlchemy URL: sqlite:///FILE or "
                     "postgresql+psycopg://user@host:5432/db")
    connect_timeout_s: float = Field(5.0, gt=0, description="timeout of the first connection "
                                     "(PostgreSQL: whole seconds, at least 2)")
    response_timeout_s: float = Field(
        120.0, gt=0, description="a PostgreSQL server that answers nothing "
        "for this long (a stalled network, a dead load balancer) fails the read or write "
        "waiting on it, naming the server, and its connection is dropped (also the TCP user "
        "timeout and keepalives); longer than any statement Headroom runs, a migration and a "
        "replica's wait for another's migration included; a migration waits half of it at most "
        "for a table lock another session holds (a backup, an open transaction), then fails "
        "naming the lock, nothing applied")
    migration_lock_wait_s: float = Field(
        300.0, gt=0, description="PostgreSQL: a migration (`headroom db upgrade | downgrade`, "
        "the start of `serve` and `demo`) waits at most this long for another migration's lock "
        "(another replica migrating the store), then fails naming the lock and this setting, "
        "nothing applied; longer than any migration Headroom ships takes")
    retention_s: float = Field(30 * 86400, ge=0, description="ticks with their plans, forecasts, "
                               "observations, ended demand hints and finished MIG re-layouts "
                               "older than this are deleted (0 keeps "
                               "everything); at least forecast.history_s, which the forecaster "
                               "reads")
    prune_interval_s: float = Field(3600.0, gt=0, description="seconds between store prunes")
    lease_duration_s: int = Field(15, ge=1, description="`serve --backend sim` and `demo` "
                                  "hold the store's simulated fleet with a lease renewed well "
                                  "inside this; one that stops renewing (a crash) is taken over "
                                  "this long after it was last seen renewing")

    @field_validator("url")
    @classmethod
    def _a_database_url(cls, url: str) -> str:
        """A store URL without a scheme (a bare file path, a typo) is a settings error naming
        db.url, not "cannot reach database" when the store is opened; so is one of a scheme the
        store cannot open (another database, another driver, a typo). (Only the form is checked
        here: settings import no database library.)"""
        if _DB_URL.match(url) is None:
            hint = f"; a SQLite file is sqlite:///{url}" if "//" not in url else ""  # a path
            shown = masked(url)  # never echo a password
            raise ValueError(f"{shown!r} is not a database URL (sqlite:///FILE or "
                             f"postgresql+psycopg://user@host:5432/db){hint}")
        scheme = url.split("://", 1)[0]
        if scheme not in DB_URL_SCHEMES:
            near = difflib.get_close_matches(scheme, DB_URL_SCHEMES, n=1)
            hint = f"; did you mean {near[0]}?" if near else ""
            shown = masked(url)
            raise ValueError(f"{shown!r}: Headroom cannot open a {scheme}:// store; supported "
                             f"schemes: {', '.join(DB_URL_SCHEMES)}{hint}")
        return url

    @model_validator(mode="after")
    def _a_timeout_postgresql_keeps(self) -> DbSettings:
        """libpq (and psycopg after it) waits whole seconds and at least 2 (1 means 2), so a
        PostgreSQL store given 1 or 2.9 would wait 2: refused rather than changed. SQLite waits
        the setting as given."""
        timeout_s = self.connect_timeout_s
        if self.url.startswith("postgres") and (timeout_s < 2 or timeout_s != int(timeout_s)):
            raise ValueError(f"db.connect_timeout_s: PostgreSQL waits whole seconds, at least 2 "
                             f"(libpq's connect_timeout), got {timeout_s:g}")
        return self


#: keys Headroom no longer has (dotted) -> what sets their job now: a file or variable that
#: still sets one is refused as an unknown key, with this hint instead of a near-miss
RETIRED_KEYS: dict[str, str] = {
    "reconcile.lookahead_s": "nothing read it; the predictive policy's forecast window is "
    "autoscaling.reaction_s + the next rung's wake (autoscaling.cached_start_p90_s in the "
    "reconcile loop), KEDA's scaler's is autoscaling.keda_lookahead_s; remove the key",
}


class ReconcileSettings(Group):
    interval_s: float = Field(30.0, gt=0, description="seconds between reconcile ticks")
    max_staleness_s: float = Field(120.0, gt=0, description="skip a tick on an older snapshot")
    target_utilization: float = Field(0.8, gt=0, le=1, description="provision need / this")
    max_forecast_age_s: float = Field(MAX_FORECAST_AGE_S, gt=0, description="older forecasts "
                                      "count as stale (at least forecast.interval_s)")
    stale_headroom: float = Field(1.3, ge=1, description="multiplier on observed load w/o forecast")
    queue_drain_s: float = Field(300.0, ge=0, description="a model's requests waiting in its "
                                 "replicas' queues count as load: their growth over the rate "
                                 "window (arrivals beyond completions) plus queued / this "
                                 "(the backlog served within this many seconds), added to its "
                                 "request rate, which counts completed requests and so cannot "
                                 "show more than a saturated model's capacity. About the time "
                                 "new replicas take to serve: the backlog term grows with the "
                                 "queue, so a much shorter drain time overshoots while they "
                                 "start. Read each tick with the Prometheus presets: Triton's "
                                 "nv_inference_pending_request_count, vLLM's "
                                 "vllm:num_requests_waiting, summed over the replicas; not "
                                 "with a custom prometheus.query. 0: not read, not counted")
    kv_cache_target: float = Field(0.9, ge=0, le=1, description="the KV cache usage (0-1) a "
                                   "vLLM or SGLang model's ready replicas are sized to: its "
                                   "observed load is at least what brings the mean usage of "
                                   "vllm:kv_cache_usage_perc (or vllm:gpu_cache_usage_perc; "
                                   "SGLang: sglang:token_usage) over its replicas to this "
                                   "(replicas x usage / this, as HPA sizes to a "
                                   "utilization), so a model whose requests are long scales "
                                   "before it preempts and queues. Read each tick with "
                                   "prometheus.metric: vllm or sglang. 0: not read, not "
                                   "counted")
    node_configs: bool = Field(True, description="lay nodes out as the fleet plan needs: MIG "
                               "re-layouts and device-plugin sharing (false: replicas and pools "
                               "only)")
    relayouts_in_flight: int = Field(1, ge=0, description="a node running GPU pods is re-laid "
                                     "out (drained) only while fewer MIG re-layouts than this "
                                     "are in flight; an empty node's does not wait. Either way "
                                     "a pool re-lays out one node at a time")
    relayout_settle_s: float = Field(120.0, ge=0, description="a node running GPU pods is "
                                     "re-laid out, or shared by fewer clients per GPU, once the "
                                     "plan has asked for the same layout this long")


class ForecastSettings(Group):
    interval_s: float = Field(300.0, gt=0, description="seconds between forecast refreshes")
    refresh_in_serve: bool = Field(True, description="serve refreshes the forecasts itself; "
                                   "false when scheduled `headroom forecast run` jobs do "
                                   "(deploy/forecast-cronjob.yaml: one shard per pod)")
    horizon_s: int = Field(1200, gt=0, le=7 * 86400, description="how far ahead to forecast "
                           "(at most a week: the loop reads minutes ahead, and a horizon of "
                           "millions of steps left every refresh without forecasts)")
    step_s: int = Field(60, gt=0, description="resampling step of the rate series")
    history_s: int = Field(7 * 86400, gt=0, description="history fed to the forecaster")
    method: str = Field("auto", description="forecaster name from the registry, or auto")
    workers: int = Field(1, ge=1, description="worker processes of the refreshes of serve and "
                         "demo, and of `headroom forecast run` without --workers")
    state_dir: Path | None = Field(Path(".headroom/forecaster-state"), description="fitted "
                                   "state kept between refreshes (None: every refresh fits "
                                   "every model)")
    fit_budget_s: float | None = Field(None, gt=0, description="a first "
                                       "fit (a model without stored state) starts only within "
                                       "this many wall seconds of a refresh's start; the rest "
                                       "get persistence (fit_deferred) and are fitted by later "
                                       "refreshes; at least one first fit per worker starts "
                                       "whatever the budget. Default: half of interval_s for "
                                       "serve and demo, no limit for forecast run")

    state_retention_s: float = Field(7 * 86400, ge=0, description="the state file of a model "
                                     "no longer listed is removed from state_dir once this "
                                     "old; 0 keeps them")

    @field_validator("state_dir", mode="before")
    @classmethod
    def _not_empty(cls, state_dir: object) -> object:
        """An empty path (an unset variable in a template) would be the working directory."""
        if isinstance(state_dir, str) and not state_dir.strip():
            raise ValueError("empty: give a directory (or null in the settings file to keep no "
                             "fitted state)")
        return state_dir

    def refresh_budget_s(self) -> float:
        """The fit budget of the refreshes of serve and demo."""
        return self.fit_budget_s if self.fit_budget_s is not None else 0.5 * self.interval_s


class SafetySettings(Group):
    dry_run: bool = Field(False, description="plan and record, never apply")
    max_node_step: int = Field(4, ge=1, description="max nodes added/removed per pool per tick")
    max_replica_step: int = Field(8, ge=1, description="max replicas changed per model per tick")
    scale_down_stabilization_s: float = Field(300.0, ge=0, description="reactive policy: "
                                              "the HPA-style replica scale-down window (the "
                                              "predictive policy's is 60 s: its forecasts "
                                              "already look ahead)")
    cluster_gpu_budget: int | None = Field(None, ge=0, description="max GPUs in the whole fleet "
                                           "(at least the pools' min_nodes x gpus_per_node)")
    # the guards' cooldown and disruption budget (controlplane.domain.guards), off by default;
    # the predictive and reactive policies apply them (static never scales down)
    scale_down_cooldown_s: float = Field(0.0, ge=0, description="no model's replicas and no "
                                         "pool's nodes are removed until this long after that "
                                         "model or pool last scaled up (0: off)")
    replica_disruption_budget: int | None = Field(None, ge=0, description="max replicas "
                                                  "removed per model per disruption_window_s "
                                                  "(None: no budget; 0: no scale-down)")
    node_disruption_budget: int | None = Field(None, ge=0, description="max nodes removed per "
                                               "pool per disruption_window_s (None: no "
                                               "budget; 0: no scale-down)")
    disruption_window_s: float = Field(600.0, gt=0, description="the window the disruption "
                                       "budgets count removals over")


class PoolSettings(Group):
    # the Karpenter NodePool's name and, after "headroom-warm-", the placeholder Deployment's:
    # a DNS-1123 label (lowercase letters, digits and '-') short enough for both
    name: str = Field(..., pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=49)
    product: str
    # the placement engine's own bounds: past them every reconcile tick died on InvalidArgument
    gpus_per_node: int = Field(8, ge=1, le=MAX_GPUS_PER_NODE)
    min_nodes: int = Field(0, ge=0)
    max_nodes: int = Field(16, ge=0)
    price_per_gpu_hour: float = Field(..., ge=0, le=MAX_PRICE_PER_GPU_HOUR,
                                      description="USD per GPU-hour")

    @field_validator("product")
    @classmethod
    def _known_product(cls, product: str) -> str:
        # the catalog gives a product's memory and MIG geometry; without them no replica fits
        # (an unknown product ran as a pool of GPUs nothing could use)
        return catalog.known_product(product)

    @model_validator(mode="after")
    def _min_below_max(self) -> PoolSettings:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"pool {self.name}: min_nodes > max_nodes")
        return self


def default_pools() -> list[PoolSettings]:
    # On-demand list prices per GPU-hour (REFERENCE.md §10.1, 2025-26): p4de/8, p5 after the
    # June 2025 cut /8, g6.xlarge.
    return [
        PoolSettings(name="a100-80gb", product="A100-80GB", gpus_per_node=8, max_nodes=8,
                     price_per_gpu_hour=5.12),
        PoolSettings(name="h100-80gb", product="H100-80GB", gpus_per_node=8, max_nodes=4,
                     price_per_gpu_hour=6.88),
        PoolSettings(name="l4", product="L4", gpus_per_node=4, max_nodes=8,
                     price_per_gpu_hour=0.80),
    ]


class SimSettings(Group):
    seed: int = Field(7, description="seed of traffic and cold-start draws")
    step_s: float = Field(10.0, gt=0, description="virtual seconds per simulation step")
    history_s: int = Field(3 * 86400, ge=0, description="synthetic history backfilled on a new "
                           "store (days of it let the forecaster fit daily seasonality)")
    node_provision_s: tuple[float, float] = Field((60.0, 180.0), description="uniform min,max")
    image_pull_s: tuple[float, float] = Field((30.0, 120.0))
    weight_load_s: tuple[float, float] = Field((5.0, 60.0))
    warmup_s: tuple[float, float] = Field((10.0, 30.0))
    warm_node_start_s: float = Field(8.0, ge=0, description="replica start on a warm node")
    mig_relayout_s: tuple[float, float] = Field((60.0, 150.0), description="uniform min,max: a "
                                                "node's MIG re-layout, cordon to uncordon")
    true_throughput_factor: dict[str, Annotated[float, Field(gt=0, le=10)]] = Field(
        default_factory=lambda: {"mistral-7b-support": 0.6}, description="model -> what its "
        "replicas really serve / its profile's throughput (missing: 1.0); the demo's "
        "mistral-7b-support serves 40 % less than its profile says, so the loop's online "
        "profile correction has something to correct ({} turns it off; at 0.8 the demo's "
        "headroom hides the error: its replicas run at about 0.6 of the profile)")
    start_warm: bool = Field(True, description="a new store's fleet is already running, sized by "
                             "the first plan (Headroom taking over a fleet); false starts from "
                             "empty pools and shows every cold start")
    binding: Literal["pack", "spread"] = Field(
        "pack", description="which ready node with room a replica binds to: pack, the first "
        "(one that ran the model before first), as kube-scheduler scoring MostAllocated; "
        "spread, the one with the most GPU capacity free, as its default LeastAllocated, where "
        "single-GPU replicas spread over the nodes can leave no node room for a replica of "
        "several GPUs (stranded: the loop raises its pool)")

    @model_validator(mode="after")
    def _ranges_ordered(self) -> SimSettings:
        for name in ("node_provision_s", "image_pull_s", "weight_load_s", "warmup_s",
                     "mig_relayout_s"):
            low, high = getattr(self, name)
            if low < 0 or high < low:
                raise ValueError(f"sim.{name} must be 0 <= min <= max, got ({low}, {high})")
        return self


_CORRECTION = CorrectionConfig()  # the core's defaults are the settings' defaults


class ProfileCorrectionSettings(Group):
    """The reconcile loop corrects each model's throughput per replica from observed load and
    request latency, the mean or ``prometheus.latency_quantile``
    (``controlplane.autoscaling.profile_correction``)."""

    enabled: bool = Field(True, description="size models with their corrected profile; false: "
                          "the offline profile as it is")
    window_s: float = Field(_CORRECTION.window_s, gt=0,
                            description="samples of this last stretch count")
    min_samples: int = Field(_CORRECTION.min_samples, ge=1,
                             description="fewer loaded samples in the window keep the value in "
                             "use (the offline profile before any correction)")
    min_load_share: float = Field(_CORRECTION.min_load_share, ge=0, le=10,
                                  description="a sample counts from this load per replica / "
                                  "the throughput in use up")
    safety: float = Field(_CORRECTION.safety, gt=0, le=1,
                          description="a profile lowered by over-SLO samples is this x a low "
                          "quantile of their load per replica")
    min_factor: float = Field(_CORRECTION.min_factor, gt=0, le=1,
                              description="corrected / offline at least")
    max_factor: float = Field(_CORRECTION.max_factor, ge=1, le=10,
                              description="corrected / offline at most")


class AutoscalingSettings(Group):
    """Predictive autoscaling (controlplane.autoscaling) and the KEDA external scaler."""

    policy: Literal["predictive", "reactive", "static"] = Field(
        "predictive", description="demand policy: forecast quantile, observed load, or the peak")
    shortfall_cost_ratio: float = Field(
        SHORTFALL_COST_RATIO, gt=1, description="price of a replica-hour of unserved demand / "
        "price of a replica-hour; sets the warm-pool quantiles (newsvendor)")
    short_minute_cost_ratio: float = Field(
        SHORT_MINUTE_COST_RATIO, ge=0, description="price of one short model-minute in "
        "replica-hours: hot replicas hold the quantile of the next forecast step this price pays "
        "for, per model (0: no hot headroom)")
    reaction_s: float = Field(60.0, gt=0, description="time to notice a change and act "
                              "(reconcile interval + metric window)")
    keep_s: float = Field(240.0, ge=0, description="warm GPUs also cover this much longer: a "
                          "node released and needed back would bill its provisioning again")
    idle_wake_s: float = Field(2.0, ge=0, description="wake time of a loaded-but-idle replica "
                               "(vLLM sleep, Triton loaded but unrouted)")
    node_stabilization_s: float = Field(120.0, ge=0, description="predictive: node scale-down "
                                        "waits this long on fresh data")
    stranded_grace_s: float = Field(120.0, ge=0, description="a pool whose replicas of several "
                                    "GPUs no node has room for (their GPUs free but spread over "
                                    "nodes) is raised for them once they have waited this long")
    node_provision_p90_s: float = Field(240.0, ge=0, description="reconcile loop: p90 time "
                                        "until a requested GPU node is ready (the cold rung)")
    cached_start_p90_s: float = Field(10.0, ge=0, description="reconcile loop: p90 start of a "
                                      "replica on a node that holds its image and weights")
    hint_lead_s: float = Field(600.0, ge=0, le=1200, description="reconcile loop: a demand "
                               "hint (headroom hint add) floors the forecast from this long "
                               "before its window starts, so nodes and replicas are ready when "
                               "it does (at most the forecast's 20 minutes)")
    reactive_target_utilization: float = Field(0.8, gt=0, le=1, description="reactive: target "
                                               "utilization (KEDA/HPA)")
    calibration_errors: int = Field(4032, ge=10, description="recent forecast errors kept to "
                                    "calibrate the upper tail")
    calibration_window_s: float = Field(14 * 86400, gt=0, description="reconcile loop: issued "
                                        "forecasts and their errors are kept this long in the "
                                        "store, then pruned")
    tenant_gpu_budgets: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict, description="tenant -> max GPUs its models may hold (warm "
        "included)")
    static_peak_rps: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict, description="static: model -> peak rps to provision all the time "
        "(every model's; a name of no model is refused at start)")
    keda_lookahead_s: float = Field(600.0, gt=0, description="KEDA scaler: forecast window "
                                    "GetMetrics covers (provisioning + cold start)")
    keda_poll_s: float = Field(5.0, gt=0, description="KEDA scaler: stream re-read interval")
    keda_max_streams: int = Field(
        128, gt=0, description="KEDA scaler: streams served at once, each holding one "
        "more gRPC server thread; KEDA opens two (StreamIsActive, StreamMetricSpec) per "
        "external-push ScaledObject, so 128 serve 64 of them")
    keda_caller_share: float = Field(
        DEFAULT_CALLER_SHARE, gt=0, le=1, description="KEDA scaler: the share of "
        "keda_max_streams one caller without a client certificate (known by its address) may "
        "hold at once, at least 1, so that a client without credentials cannot take every "
        "stream; a caller with an unscoped client certificate (KEDA under mutual TLS) may use "
        "them all")
    profile_correction: ProfileCorrectionSettings = Field(
        default_factory=ProfileCorrectionSettings, description="online profile correction")

    @model_validator(mode="after")
    def _static_has_peaks(self) -> AutoscalingSettings:
        if self.policy == "static" and not self.static_peak_rps:
            raise ValueError("autoscaling.static_peak_rps: policy static needs the peak rps of "
                             "every model")
        return self


class DashboardSettings(Group):
    address: str = Field("127.0.0.1")
    port: int = Field(8501, ge=0, le=65535)
    query_timeout_s: float = Field(60.0, gt=0, description="a read of a PostgreSQL store "
                                   "running longer fails the page with an error line instead "
                                   "of hanging it (statement_timeout)")
