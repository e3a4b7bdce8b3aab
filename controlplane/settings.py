"""Settings: one typed root per process (pydantic-settings), env prefix ``HEADROOM_``, nested groups
with ``__`` as delimiter (``HEADROOM_RECONCILE__INTERVAL_S=15``), and an optional YAML file.

Precedence: explicit overrides > environment > YAML file > defaults. Unknown keys are errors.
"""

from __future__ import annotations

import os
import re
import reprlib
from contextvars import ContextVar
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)

from controlplane.autoscaling.calibration import MIN_ERRORS
from controlplane.autoscaling.policies import SHORT_MINUTE_COST_RATIO, SHORTFALL_COST_RATIO
from controlplane.domain.desired import PoolSpec
from controlplane.settings_env import ENV_PREFIX, env_json_error, unknown_env_variable
from scheduler.domain import catalog
from scheduler.domain.validate import MAX_GPUS_PER_NODE, MAX_PRICE_PER_GPU_HOUR
from scheduler.metrics import host_and_port

_YAML_FILE: ContextVar[Path | None] = ContextVar("headroom_yaml_file", default=None)


def _wants_number(annotation: Any) -> bool:
    """int or float, alone, optional, or as the items of a tuple (not bool)."""
    if annotation in (int, float):
        return True
    args = get_args(annotation)
    if get_origin(annotation) in (Union, UnionType, tuple):
        return bool not in args and any(_wants_number(a) for a in args if a is not type(None))
    return False


def _has_bool(value: object) -> bool:
    return isinstance(value, bool) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, bool) for v in value))


class Group(BaseModel):
    # no setting means "forever": an inf or nan would pass gt=0 and overflow (or never fire) later
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: object, info: ValidationInfo) -> object:
        """YAML's true / false are not numbers (pydantic would read ``interval_s: true`` as 1)."""
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _has_bool(value) and _wants_number(field.annotation):
            raise ValueError(f"expected a number, got {value!r}".replace("True", "true")
                             .replace("False", "false"))
        return value


_DB_URL = re.compile(r"[A-Za-z][\w+]*://")  # SQLAlchemy's dialect[+driver]://


class DbSettings(Group):
    url: str = Field("sqlite:///headroom.db", description="SQLAlchemy URL: sqlite:///FILE or "
                     "postgresql+psycopg://user@host:5432/db")
    connect_timeout_s: float = Field(5.0, gt=0, description="timeout of the first connection")

    @field_validator("url")
    @classmethod
    def _a_database_url(cls, url: str) -> str:
        """A store URL without a scheme (a bare file path, a typo) is a settings error naming
        db.url, not "cannot reach database" when the store is opened. (Only the form is checked
        here: settings import no database library.)"""
        if _DB_URL.match(url) is None:
            hint = f"; a SQLite file is sqlite:///{url}" if "//" not in url else ""  # a path
            shown = re.sub(r":[^:@/]*@", ":***@", url)  # never echo a password
            raise ValueError(f"{shown!r} is not a database URL (sqlite:///FILE or "
                             f"postgresql+psycopg://user@host:5432/db){hint}")
        return url


class ReconcileSettings(Group):
    interval_s: float = Field(30.0, gt=0, description="seconds between reconcile ticks")
    max_staleness_s: float = Field(120.0, gt=0, description="skip a tick on an older snapshot")
    target_utilization: float = Field(0.8, gt=0, le=1, description="provision need / this")
    lookahead_s: float = Field(600.0, ge=0, description="forecast window covered: provision + load")
    max_forecast_age_s: float = Field(1800.0, gt=0, description="older forecasts count as stale")
    stale_headroom: float = Field(1.3, ge=1, description="multiplier on observed load w/o forecast")
    node_configs: bool = Field(True, description="lay nodes out as the fleet plan needs: MIG "
                               "re-layouts and device-plugin sharing (false: replicas and pools "
                               "only)")
    relayouts_in_flight: int = Field(1, ge=0, description="a node running GPU pods is re-laid "
                                     "out (drained) only while fewer MIG re-layouts than this "
                                     "are in flight; an empty node's does not wait")
    relayout_settle_s: float = Field(120.0, ge=0, description="a node running GPU pods is "
                                     "re-laid out once the plan has asked for the same layout "
                                     "this long")


class ForecastSettings(Group):
    interval_s: float = Field(300.0, gt=0, description="seconds between forecast refreshes")
    horizon_s: int = Field(1200, gt=0, description="how far ahead to forecast")
    step_s: int = Field(60, gt=0, description="resampling step of the rate series")
    history_s: int = Field(7 * 86400, gt=0, description="history fed to the forecaster")
    method: str = Field("auto", description="forecaster name from the registry, or auto")
    workers: int = Field(1, ge=1, description="worker processes of the refreshes of serve and "
                         "demo")
    state_dir: Path | None = Field(Path(".headroom/forecaster-state"), description="fitted "
                                   "state kept between refreshes (None: every refresh fits "
                                   "every model)")
    fit_budget_s: float | None = Field(None, gt=0, description="a first "
                                       "fit (a model without stored state) starts only within "
                                       "this many wall seconds of a refresh's start; the rest "
                                       "get persistence (fit_deferred) and are fitted by later "
                                       "refreshes. Default: half of interval_s for serve and "
                                       "demo, no limit for forecast run")

    def refresh_budget_s(self) -> float:
        """The fit budget of the refreshes of serve and demo."""
        return self.fit_budget_s if self.fit_budget_s is not None else 0.5 * self.interval_s


class SafetySettings(Group):
    dry_run: bool = Field(False, description="plan and record, never apply")
    max_node_step: int = Field(4, ge=1, description="max nodes added/removed per pool per tick")
    max_replica_step: int = Field(8, ge=1, description="max replicas changed per model per tick")
    scale_down_stabilization_s: float = Field(300.0, ge=0, description="HPA-style window")
    cluster_gpu_budget: int | None = Field(None, ge=0, description="max GPUs in the whole fleet")


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
        entry = catalog.lookup(product)
        if entry is None or entry.memory_mib <= 0:
            known = ", ".join(p.name for p in catalog.PRODUCTS if p.memory_mib > 0)
            raise ValueError(f"unknown GPU product {product!r}; known: {known} "
                             "(or their aliases, scheduler/domain/catalog.py)")
        return product

    @model_validator(mode="after")
    def _min_below_max(self) -> PoolSettings:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"pool {self.name}: min_nodes > max_nodes")
        return self


def _default_pools() -> list[PoolSettings]:
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
    start_warm: bool = Field(True, description="a new store's fleet is already running, sized by "
                             "the first plan (Headroom taking over a fleet); false starts from "
                             "empty pools and shows every cold start")

    @model_validator(mode="after")
    def _ranges_ordered(self) -> SimSettings:
        for name in ("node_provision_s", "image_pull_s", "weight_load_s", "warmup_s",
                     "mig_relayout_s"):
            low, high = getattr(self, name)
            if low < 0 or high < low:
                raise ValueError(f"{name} must be 0 <= min <= max, got ({low}, {high})")
        return self


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
    node_provision_p90_s: float = Field(240.0, ge=0, description="reconcile loop: p90 time "
                                        "until a requested GPU node is ready (the cold rung)")
    cached_start_p90_s: float = Field(10.0, ge=0, description="reconcile loop: p90 start of a "
                                      "replica on a node that holds its image and weights")
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
        default_factory=dict, description="static: model -> peak rps to provision all the time")
    keda_lookahead_s: float = Field(600.0, gt=0, description="KEDA scaler: forecast window "
                                    "GetMetrics covers (provisioning + cold start)")
    keda_poll_s: float = Field(5.0, gt=0, description="KEDA scaler: stream re-read interval")

    @model_validator(mode="after")
    def _static_has_peaks(self) -> AutoscalingSettings:
        if self.policy == "static" and not self.static_peak_rps:
            raise ValueError("autoscaling.static_peak_rps: policy static needs the peak rps of "
                             "every model")
        return self


class PlacementSettings(Group):
    listen: str = Field("127.0.0.1:50051", description="host:port of the gRPC placement API")
    metrics_listen: str | None = Field(
        None, description="host:port of Prometheus /metrics (placement API and reconcile loop) "
        "for headroom serve and demo; None = off")

    @field_validator("listen", "metrics_listen")
    @classmethod
    def _host_and_port(cls, value: str | None) -> str | None:
        if value is not None:
            host_and_port(value)
        return value


class DashboardSettings(Group):
    address: str = Field("127.0.0.1")
    port: int = Field(8501, ge=0, le=65535)


class PrometheusSettings(Group):
    url: str | None = Field(None, description="base URL of Prometheus, e.g. http://127.0.0.1:9090")
    timeout_s: float = Field(10.0, gt=0)


class KubernetesSettings(Group):
    kubeconfig: str | None = Field(None, description="path; None = in-cluster or ~/.kube/config")
    namespace: str = Field("headroom")
    field_manager: str = Field("headroom")
    request_timeout_s: float = Field(10.0, gt=0, description="timeout of one API request")
    model_label: str = Field("headroom.dev/model", description="label on Triton/vLLM "
                             "Deployments and StatefulSets naming the model they serve")
    workload_namespaces: list[str] = Field(default_factory=list, description="namespaces of "
                                           "model workloads; empty = all namespaces")
    nodepool_names: dict[str, str] = Field(default_factory=dict, description="pool -> Karpenter "
                                           "NodePool name (default: the pool name)")
    placeholder_priority_class: str = Field("headroom-warm-placeholder", description="low "
                                            "PriorityClass of the warm-capacity placeholder pods")
    placeholder_image: str = Field("registry.k8s.io/pause:3.10")
    gpu_operator_namespace: str = Field("gpu-operator", description="namespace of the GPU "
                                        "Operator's MIG manager and device plugin ConfigMaps")
    mig_config_map: str = Field("headroom-mig-parted-config", description="mig-parted "
                                "ConfigMap (key config.yaml) the MIG manager is pointed at")
    device_plugin_config_map: str = Field("headroom-device-plugin-config", description=
                                          "device-plugin ConfigMap (one key per named config)")
    mig_strategy: Literal["single", "mixed"] = Field("mixed", description="device plugin "
                                                     "MIG strategy (mixed for custom layouts)")
    lease_name: str = Field("headroom-leader", description="coordination.k8s.io/v1 Lease")
    lease_duration_s: int = Field(15, ge=1, description="followers wait this long")
    renew_deadline_s: float = Field(10.0, gt=0, description="a leader stops acting this long "
                                    "after its last successful renew (< lease_duration_s)")
    identity: str | None = Field(None, description="leader election identity; None = "
                                 "hostname + process id")
    surge_timeout_s: float = Field(900.0, gt=0, description="MIG relayout: wait for surge "
                                   "capacity before giving up (nothing disrupted yet)")
    drain_timeout_s: float = Field(3600.0, gt=0, description="MIG relayout: give up draining "
                                   "(uncordon, alert) after this long; never forces evictions")
    mig_timeout_s: float = Field(900.0, gt=0, description="MIG relayout: wait this long for "
                                 "nvidia.com/mig.config.state=success before rolling back")

    @model_validator(mode="after")
    def _lease_timing(self) -> KubernetesSettings:
        if self.renew_deadline_s >= self.lease_duration_s:
            raise ValueError("k8s.renew_deadline_s must be < k8s.lease_duration_s")
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True,
        allow_inf_nan=False)

    backend: Literal["sim", "kubernetes"] = Field("sim", description="cluster backend")
    db: DbSettings = DbSettings()
    reconcile: ReconcileSettings = ReconcileSettings()
    forecast: ForecastSettings = ForecastSettings()
    safety: SafetySettings = SafetySettings()
    pools: list[PoolSettings] = Field(default_factory=_default_pools, min_length=1,
                                      description="node pools; none would place nothing")
    sim: SimSettings = SimSettings()
    placement: PlacementSettings = PlacementSettings()
    autoscaling: AutoscalingSettings = AutoscalingSettings()
    dashboard: DashboardSettings = DashboardSettings()
    prometheus: PrometheusSettings = PrometheusSettings()
    k8s: KubernetesSettings = KubernetesSettings()

    @model_validator(mode="after")
    def _cross_field(self) -> Settings:
        if self.forecast.horizon_s < self.forecast.step_s:
            raise ValueError("forecast.horizon_s must be >= forecast.step_s")
        if self.reconcile.max_staleness_s < self.reconcile.interval_s:
            raise ValueError("reconcile.max_staleness_s must be >= reconcile.interval_s")
        window_s, refresh_s = self.autoscaling.calibration_window_s, self.forecast.interval_s
        if window_s < MIN_ERRORS * refresh_s:
            raise ValueError(
                f"autoscaling.calibration_window_s ({window_s:g} s) holds "
                f"{window_s / refresh_s:g} forecast refreshes (forecast.interval_s = "
                f"{refresh_s:g} s); the upper tail is calibrated from {MIN_ERRORS} errors, "
                f"so it must be >= {MIN_ERRORS * refresh_s:g} s")
        names = [p.name for p in self.pools]
        if len(names) != len(set(names)):
            raise ValueError("pools: names must be unique")
        products = [getattr(catalog.lookup(p.product), "name", p.product) for p in self.pools]
        twice = sorted({k for k in products if products.count(k) > 1})
        if twice:
            raise ValueError(f"pools: one pool per GPU product (the fleet plan places by "
                             f"product, so each pool would be sized for all of it); "
                             f"{', '.join(twice)} has more than one")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        yaml_file = _YAML_FILE.get()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if yaml_file is not None:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_file))
        return tuple(sources)


class ConfigError(Exception):
    """Bad configuration; the message is one line naming the field or file."""


def _describe(error: ValidationError, origin: str) -> str:
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(root)"
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    more = f" (+{error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{origin}: {field}: {message}{more}"


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader refusing a key given twice in one mapping (PyYAML keeps the last one, so
    ``interval_s: 10`` further up would be dropped without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _check_yaml_root(config_file: Path) -> None:
    """A settings file is a mapping of groups (or empty) without a key given twice; a list or a
    scalar would reach pydantic-settings' merge as a TypeError or a baffling message."""
    root = yaml.load(config_file.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    if root is not None and not isinstance(root, dict):
        raise ValueError("the top level must be a mapping of settings (db:, reconcile:, ...), "
                         f"got {reprlib.repr(root)}")


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from defaults, an optional YAML file, the environment and overrides."""
    origin = str(config_file) if config_file else "configuration"
    if config_file is not None and not config_file.is_file():
        what = "a directory, not a config file" if config_file.is_dir() else "no such config file"
        raise ConfigError(f"{config_file}: {what}")
    mistake = unknown_env_variable(Settings, os.environ)
    if mistake is not None:
        raise ConfigError(mistake)
    token = _YAML_FILE.set(config_file)
    try:
        if config_file is not None:
            _check_yaml_root(config_file)
        return Settings(**overrides)
    except ValidationError as error:
        raise ConfigError(_describe(error, origin)) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise ConfigError(f"{origin}:{where}: {problem}") from None
    except SettingsError as error:
        named = env_json_error(Settings, error, os.environ)
        raise ConfigError(named or f"{origin}: {str(error).splitlines()[0]}") from None
    except (ValueError, OSError) as error:
        raise ConfigError(f"{origin}: {str(error).splitlines()[0]}") from None
    finally:
        _YAML_FILE.reset(token)


def pool_specs(settings: Settings) -> tuple[PoolSpec, ...]:
    """The configured node pools as domain values."""
    return tuple(PoolSpec(p.name, p.product, p.gpus_per_node, p.min_nodes, p.max_nodes,
                          p.price_per_gpu_hour) for p in settings.pools)
