"""Settings: one typed root per process (pydantic-settings), env prefix ``HEADROOM_``, nested groups
with ``__`` as delimiter (``HEADROOM_RECONCILE__INTERVAL_S=15``), and an optional YAML file.

Precedence: explicit overrides > environment > YAML file > defaults; a higher source's value of a
setting replaces the lower one's (a mapping such as ``autoscaling.tenant_gpu_budgets`` too), and
groups combine field by field (``settings_precedence``). Unknown keys are errors.
"""

from __future__ import annotations

import difflib
import os
import reprlib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, Field, PrivateAttr, ValidationError, model_validator
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)

from controlplane.autoscaling.calibration import MIN_ERRORS
from controlplane.domain.desired import PoolSpec
from controlplane.domain.errors import listed_problems
from controlplane.settings_cluster import KubernetesSettings, PrometheusSettings
from controlplane.settings_env import (
    ENV_PREFIX,
    env_json_error,
    env_variable_of,
    unknown_env_variable,
)
from controlplane.settings_groups import (
    RETIRED_KEYS,
    AutoscalingSettings,
    DashboardSettings,
    DbSettings,
    ForecastSettings,
    PoolSettings,
    ReconcileSettings,
    SafetySettings,
    SimSettings,
    default_pools,
)
from controlplane.settings_placement import PlacementSettings
from controlplane.settings_precedence import WholeMappings
from controlplane.yaml_keys import UniqueKeyLoader
from scheduler.domain import catalog

__all__ = [
    "AutoscalingSettings", "ConfigError", "DashboardSettings", "DbSettings", "ForecastSettings",
    "KubernetesSettings", "PlacementSettings", "PoolSettings", "PrometheusSettings",
    "ReconcileSettings", "SafetySettings", "Settings", "SimSettings", "load_settings",
    "pool_specs",
]

_YAML_FILE: ContextVar[Path | None] = ContextVar("headroom_yaml_file", default=None)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True,
        allow_inf_nan=False)

    backend: Literal["sim", "kubernetes"] = Field("sim", description="cluster backend")
    db: DbSettings = DbSettings()
    reconcile: ReconcileSettings = ReconcileSettings()
    forecast: ForecastSettings = ForecastSettings()
    safety: SafetySettings = SafetySettings()
    pools: list[PoolSettings] = Field(default_factory=default_pools, min_length=1,
                                      description="node pools; none would place nothing")
    sim: SimSettings = SimSettings()
    placement: PlacementSettings = PlacementSettings()
    autoscaling: AutoscalingSettings = AutoscalingSettings()
    dashboard: DashboardSettings = DashboardSettings()
    prometheus: PrometheusSettings = PrometheusSettings()
    k8s: KubernetesSettings = KubernetesSettings()
    _db_url_from: str = PrivateAttr(default="the default")

    @property
    def db_url_from(self) -> str:
        """Where ``db.url`` came from (the command line, the environment, the config file or
        the default), for errors about the store it names."""
        return self._db_url_from

    def with_db_url_from(self, origin: str) -> Settings:
        """A copy whose ``db.url`` is said to come from ``origin`` (a command's own default)."""
        named = self.model_copy()
        named._db_url_from = origin
        return named

    @model_validator(mode="after")
    def _cross_field(self) -> Settings:
        if self.forecast.horizon_s < self.forecast.step_s:
            raise ValueError("forecast.horizon_s must be >= forecast.step_s")
        if 0 < self.db.retention_s < self.forecast.history_s:
            raise ValueError(f"db.retention_s ({self.db.retention_s:g} s) must be 0 (keep "
                             f"everything) or >= forecast.history_s "
                             f"({self.forecast.history_s} s): the forecaster reads that much "
                             "history from the store")
        correction_s = self.autoscaling.profile_correction.window_s
        if 0 < self.db.retention_s < correction_s:
            raise ValueError(f"autoscaling.profile_correction.window_s ({correction_s:g} s) "
                             f"must be <= db.retention_s ({self.db.retention_s:g} s): the "
                             "correction reads that much of the stored observations")
        if 0 < self.db.retention_s < self.k8s.relayout_retry_after_s:
            raise ValueError(f"k8s.relayout_retry_after_s ({self.k8s.relayout_retry_after_s:g} "
                             f"s) must be <= db.retention_s ({self.db.retention_s:g} s): the "
                             "retry backoff reads the finished re-layouts the store keeps")
        if self.reconcile.max_staleness_s < self.reconcile.interval_s:
            raise ValueError("reconcile.max_staleness_s must be >= reconcile.interval_s")
        if self.reconcile.max_forecast_age_s < self.forecast.interval_s:
            # the interval is the refresh cadence whoever refreshes (serve, or the CronJob of
            # refresh_in_serve false): an older limit would call every forecast stale before
            # the next one is due
            raise ValueError(f"reconcile.max_forecast_age_s "
                             f"({self.reconcile.max_forecast_age_s:g} s) must be >= "
                             f"forecast.interval_s ({self.forecast.interval_s:g} s): forecasts "
                             "are refreshed that often, so a shorter age limit would find each "
                             "one stale before the next is due")
        window_s, refresh_s = self.autoscaling.calibration_window_s, self.forecast.interval_s
        if window_s < MIN_ERRORS * refresh_s:
            raise ValueError(
                f"autoscaling.calibration_window_s ({window_s:g} s) holds "
                f"{window_s / refresh_s:g} forecast refreshes (forecast.interval_s = "
                f"{refresh_s:g} s); the upper tail is calibrated from {MIN_ERRORS} errors, "
                f"so it must be >= {MIN_ERRORS * refresh_s:g} s")
        names = [p.name for p in self.pools]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"pools: names must be unique; {', '.join(map(repr, repeated))} "
                             f"is the name of more than one")
        strangers = sorted(set(self.k8s.nodepool_names) - set(names))
        if strangers:  # a misspelt pool would keep the NodePool name of its own
            raise ValueError(f"k8s.nodepool_names: no pool is named "
                             f"{', '.join(map(repr, strangers))}; the pools are "
                             f"{', '.join(sorted(names))}")
        products = [getattr(catalog.lookup(p.product), "name", p.product) for p in self.pools]
        twice = sorted({k for k in products if products.count(k) > 1})
        if twice:
            raise ValueError(f"pools: one pool per GPU product (the fleet plan places by "
                             f"product, so each pool would be sized for all of it); "
                             f"{', '.join(twice)} has more than one")
        self._budget_holds_the_floor()
        return self

    def _budget_holds_the_floor(self) -> None:
        """The cluster GPU budget never takes a pool below min_nodes, so a budget under the
        pools' floor would be paid for and never hold."""
        budget = self.safety.cluster_gpu_budget
        floor = sum(p.min_nodes * p.gpus_per_node for p in self.pools)
        if budget is not None and budget < floor:
            held = ", ".join(f"{p.name} {p.min_nodes} x {p.gpus_per_node}"
                             for p in self.pools if p.min_nodes)
            raise ValueError(f"safety.cluster_gpu_budget ({budget} GPUs) must be >= the pools' "
                             f"floor, the sum of pools[].min_nodes x gpus_per_node ({floor} "
                             f"GPUs: {held}): pools never scale below min_nodes, so the fleet "
                             "would hold the floor whatever the budget")

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
        # a higher source's mapping replaces the lower one's; groups combine field by field.
        # The lowest (the file) stays as read: keys of a mapping the environment names one by
        # one merge into its dicts
        sources: list[PydanticBaseSettingsSource] = [
            WholeMappings(settings_cls, init_settings),
            WholeMappings(settings_cls, env_settings, environment=True)]
        if yaml_file is not None:
            # UTF-8 as its checks read it, not the locale's encoding (ASCII under LC_ALL=C
            # refused a comment with an accent)
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_file,
                                                    yaml_file_encoding="utf-8"))
        return tuple(sources)


class ConfigError(Exception):
    """Bad configuration; the message is one line naming the field or file."""


#: pydantic's error types of a number outside its bounds
_BOUNDS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def _describe(error: ValidationError, origin: str) -> str:
    """Every error of the settings, one line each naming the file or environment variable and
    the key (``listed_problems``)."""
    return listed_problems([_described(problem, origin) for problem in error.errors()])


def _described(problem: ErrorDetails, origin: str) -> str:
    field = ".".join(str(part) for part in problem["loc"])
    message = problem["msg"]
    if problem["type"] in _BOUNDS:  # the value as given (e.g. a negative price)
        message += f", got {problem['input']}"
    named = env_variable_of(problem["loc"], os.environ)
    if problem["type"] == "value_error" and _is_model(_annotation_at(problem["loc"])):
        # a check across fields of the settings (loc ()), a group or a pool: its message names
        # them, without pydantic's "(root): Value error, " or "placement: Value error, "
        return f"{named or origin}: {message.removeprefix('Value error, ')}"
    if problem["type"] == "extra_forbidden":
        near = _close_match(problem["loc"])
        variable = ENV_PREFIX + "__".join(str(part) for part in problem["loc"]).upper()
        if near and named is not None and named.upper().endswith(variable):
            near = ENV_PREFIX + near.replace(".", "__").upper()  # its own variable, misspelt
        message = f"unknown key; did you mean {near}?" if near else "unknown key"
        if field in RETIRED_KEYS:
            message = f"unknown key (retired: {RETIRED_KEYS[field]})"
    return f"{named or origin}: {field or '(root)'}: {message}"


def _annotation_at(loc: tuple[int | str, ...]) -> Any:
    """The type of the settings' value at ``loc`` (``("pools", 0)`` -> PoolSettings); None
    when ``loc`` goes where no field of the settings is."""
    annotation: Any = Settings
    for part in loc:
        if isinstance(part, int):
            annotation = get_args(annotation)[0] if get_origin(annotation) is list else None
        elif _is_model(annotation) and part in annotation.model_fields:
            annotation = annotation.model_fields[part].annotation
        else:
            return None
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _close_match(loc: tuple[int | str, ...]) -> str | None:
    """``reconcile.interval_s`` for an unknown key at ``loc`` (``reconcile.intervl_s``) near a
    known one, else None."""
    model = _annotation_at(loc[:-1])
    if not _is_model(model):
        return None
    near = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return ".".join(str(part) for part in (*loc[:-1], near[0])) if near else None


def _check_yaml_root(config_file: Path) -> None:
    """A settings file is a mapping of groups (or empty) named by strings, without a key given
    twice; a list or a scalar would reach pydantic-settings' merge as a TypeError or a baffling
    message."""
    raw = config_file.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:  # e.g. saved as Latin-1: say where, not the offset
        line = raw[:error.start].count(b"\n") + 1
        raise ValueError(f"line {line}: not UTF-8 (byte 0x{raw[error.start]:02x}); save the "
                         "file as UTF-8") from None
    root = yaml.load(text, Loader=UniqueKeyLoader)
    if root is not None and not isinstance(root, dict):
        raise ValueError("the top level must be a mapping of settings (db:, reconcile:, ...), "
                         f"got {reprlib.repr(root)}")
    node = yaml.compose(text, Loader=UniqueKeyLoader) if root else None
    for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
        if key_node.tag not in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"):
            # 1:, ~: or yes: (a YAML 1.1 boolean) reached pydantic-settings as a TypeError
            read_as = key_node.tag.rsplit(":", 1)[-1]
            raise yaml.MarkedYAMLError(problem=f"key {key_node.value!r} is read as {read_as}, "
                                       "not a name of settings (db:, reconcile:, ...)",
                                       problem_mark=key_node.start_mark)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from defaults, an optional YAML file, the environment and overrides."""
    origin = str(config_file) if config_file else "configuration"
    if config_file is not None and not config_file.is_file():
        if config_file.is_dir():
            what = "a directory, not a config file"
        elif config_file.exists():  # e.g. --config <(envsubst < headroom.yaml): read only once
            what = ("not a regular file (a pipe or a device): write the settings to a file "
                    "and give its path")
        else:
            what = "no such config file"
        raise ConfigError(f"{config_file}: {what}")
    mistake = unknown_env_variable(Settings, os.environ)
    if mistake is not None:
        raise ConfigError(mistake)
    token = _YAML_FILE.set(config_file)
    try:
        if config_file is not None:
            _check_yaml_root(config_file)
        settings = Settings(**overrides)
        settings._db_url_from = _db_url_origin(config_file, overrides)
        return settings
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


#: the settings file a child process loads as its parent did: ``headroom dashboard --config F``
#: names F here for its Streamlit server, whose pages load settings with
#: ``load_inherited_settings``. Not a setting (``load_settings`` itself never reads it).
CONFIG_FILE_ENV = f"{ENV_PREFIX}CONFIG_FILE"


def load_inherited_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings as the parent process loaded them: from the file ``CONFIG_FILE_ENV`` names
    (none when unset), and the environment, through ``load_settings``."""
    named = (os.environ if environ is None else environ).get(CONFIG_FILE_ENV)
    return load_settings(Path(named) if named else None)


def _db_url_origin(config_file: Path | None, overrides: Mapping[str, Any]) -> str:
    """Where ``db.url`` came from, by pydantic-settings' precedence: overrides (a command-line
    option such as ``demo --db``), the environment, the YAML file, the default."""
    given = overrides.get("db")
    if (isinstance(given, Mapping) and "url" in given) or (
            isinstance(given, DbSettings) and "url" in given.model_fields_set):
        return "the command line"
    environment = {k.upper(): v for k, v in os.environ.items()}
    if f"{ENV_PREFIX}DB__URL" in environment:
        return f"environment {ENV_PREFIX}DB__URL"
    if '"url"' in environment.get(f"{ENV_PREFIX}DB", ""):  # the group as JSON
        return f"environment {ENV_PREFIX}DB"
    if config_file is not None:
        loaded = yaml.safe_load(config_file.read_text(encoding="utf-8"))
        if isinstance(loaded, dict) and isinstance(loaded.get("db"), dict) \
                and "url" in loaded["db"]:
            return f"{config_file}: db.url"
    return "the default"


def pool_specs(settings: Settings) -> tuple[PoolSpec, ...]:
    """The configured node pools as domain values."""
    return tuple(PoolSpec(p.name, p.product, p.gpus_per_node, p.min_nodes, p.max_nodes,
                          p.price_per_gpu_hour) for p in settings.pools)
