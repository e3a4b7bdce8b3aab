"""``headroom simulate --config``: what a simulation takes of ``headroom serve``'s settings.

The file is loaded as ``serve`` loads it (``load_settings``: the environment's ``HEADROOM_*``
variables over the file, every value checked). Only the keys it sets are taken: a key it leaves
out keeps simulate's own default, so an empty file simulates exactly what no file does.
Precedence: an option given on the command line > the settings > the models file (GPU budgets,
node pools) > simulate's defaults. The keys a simulation cannot honour (the store, the cluster
backend, Prometheus, ...) are listed in ``ignored``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from controlplane.autoscaling.policies import ScaleDownGuards
from controlplane.autoscaling.profile_correction import CorrectionConfig
from controlplane.domain.desired import PoolSpec
from controlplane.settings import Settings, pool_specs
from controlplane.simulation.sim_config import NodeShape, SimConfig

#: simulate's options (by parameter name) and the setting that gives each one's value when the
#: option is not given on the command line
OPTION_SETTINGS: Mapping[str, str] = {
    "tick_s": "reconcile.interval_s",
    "forecast_interval_s": "forecast.interval_s",
    "forecast_method": "forecast.method",
    "shortfall_cost_ratio": "autoscaling.shortfall_cost_ratio",
    "short_minute_cost_ratio": "autoscaling.short_minute_cost_ratio",
    "reactive_target": "autoscaling.reactive_target_utilization",
    "hint_lead_s": "autoscaling.hint_lead_s",
    "policy": "autoscaling.policy",
}
#: the policies' knobs (``PolicyKnobs``) by the setting that gives them
KNOB_SETTINGS: Mapping[str, str] = {
    "max_node_step": "safety.max_node_step",
    "max_replica_step": "safety.max_replica_step",
    "reactive_stabilization_s": "safety.scale_down_stabilization_s",
    "node_stabilization_s": "autoscaling.node_stabilization_s",
    "keep_s": "autoscaling.keep_s",
    "reaction_s": "autoscaling.reaction_s",
    "predictive_target_utilization": "reconcile.target_utilization",
    "max_forecast_age_s": "reconcile.max_forecast_age_s",
    "stale_headroom": "reconcile.stale_headroom",
}
#: the simulation's options (``SimOptions``) that no command-line option sets
SIM_OPTION_SETTINGS: Mapping[str, str] = {
    "forecast_horizon_s": "forecast.horizon_s",
    "forecast_history_s": "forecast.history_s",
}
_GUARDS = ("safety.scale_down_cooldown_s", "safety.replica_disruption_budget",
           "safety.node_disruption_budget", "safety.disruption_window_s")
_BUDGETS = ("safety.cluster_gpu_budget", "autoscaling.tenant_gpu_budgets")
_CORRECTION = "autoscaling.profile_correction"
#: the settings' pools replace the models file's fleet (``with_pools``); not a policy's key
POOLS = "pools"
HONOURED = frozenset({*OPTION_SETTINGS.values(), *KNOB_SETTINGS.values(),
                      *SIM_OPTION_SETTINGS.values(), *_GUARDS, *_BUDGETS, _CORRECTION})


def set_keys(group: BaseModel, prefix: str = "") -> tuple[str, ...]:
    """The dotted keys a settings group was given (a file or the environment), not defaulted;
    a nested group's own keys, a list or a mapping as one key."""
    keys: list[str] = []
    for name in sorted(group.model_fields_set):
        value = getattr(group, name)
        dotted = f"{prefix}{name}"
        if isinstance(value, BaseModel) and dotted != _CORRECTION:
            keys.extend(set_keys(value, f"{dotted}."))
        else:
            keys.append(dotted)
    return tuple(keys)


def setting_value(settings: Settings, dotted: str) -> Any:
    """The value of a dotted settings key (``safety.max_node_step``)."""
    value: Any = settings
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


@dataclass(frozen=True, slots=True)
class SimulateSettings:
    """The values a settings file sets that a simulation honours, by simulate's own names."""

    source: str  # the file, for errors naming it
    options: Mapping[str, Any] = field(default_factory=dict)  # option parameter -> value
    knobs: Mapping[str, Any] = field(default_factory=dict)  # PolicyKnobs field -> value
    sim_options: Mapping[str, Any] = field(default_factory=dict)  # SimOptions field -> value
    scale_down: ScaleDownGuards | None = None  # None: no guard key set (all off)
    cluster_gpu_budget: tuple[int | None] | None = None  # (value,) when set
    tenant_gpu_budgets: Mapping[str, float] | None = None
    #: (on,) with autoscaling.profile_correction set: its correction, or off
    profile_correction: tuple[CorrectionConfig | None] | None = None
    pools: tuple[PoolSpec, ...] | None = None  # None: the key is not set
    ignored: tuple[str, ...] = ()
    taken: tuple[str, ...] = ()  # the honoured keys the file (or the environment) sets

    @property
    def offered(self) -> tuple[str, ...] | None:
        """The GPU products of the settings' pools (None: the key is not set)."""
        return None if self.pools is None else tuple(p.product for p in self.pools)

    def where(self, option: str) -> str:
        """``FILE: group.key`` of the setting an option's value came from."""
        return f"{self.source}: {OPTION_SETTINGS[option]}"


def simulate_settings(settings: Settings, source: str) -> SimulateSettings:
    """What of ``settings`` a simulation takes: the keys given, by what they set."""
    given = set_keys(settings)
    chosen = set(given)

    def taken(names: Mapping[str, str]) -> dict[str, Any]:
        return {name: setting_value(settings, key) for name, key in names.items() if key in chosen}

    safety = settings.safety
    scale_down = (ScaleDownGuards(safety.scale_down_cooldown_s, safety.replica_disruption_budget,
                                  safety.node_disruption_budget, safety.disruption_window_s)
                  if chosen & set(_GUARDS) else None)
    pc = settings.autoscaling.profile_correction
    correction = (CorrectionConfig(window_s=pc.window_s, min_samples=pc.min_samples,
                                   min_load_share=pc.min_load_share, safety=pc.safety,
                                   min_factor=pc.min_factor, max_factor=pc.max_factor)
                  if pc.enabled else None)
    return SimulateSettings(
        source, options=taken(OPTION_SETTINGS), knobs=taken(KNOB_SETTINGS),
        sim_options=taken(SIM_OPTION_SETTINGS), scale_down=scale_down,
        cluster_gpu_budget=(safety.cluster_gpu_budget,)
        if "safety.cluster_gpu_budget" in chosen else None,
        tenant_gpu_budgets=dict(settings.autoscaling.tenant_gpu_budgets)
        if "autoscaling.tenant_gpu_budgets" in chosen else None,
        profile_correction=(correction,) if _CORRECTION in chosen else None,
        pools=pool_specs(settings) if POOLS in chosen else None,
        ignored=tuple(k for k in given if k not in HONOURED and k != POOLS),
        taken=tuple(k for k in given if k in HONOURED))


def with_budgets(config: SimConfig, chosen: SimulateSettings) -> SimConfig:
    """``config`` with the GPU budgets the settings set in place of the models file's; a tenant
    budget naming no model's tenant is refused (ValueError naming file and key)."""
    fleet = config.fleet
    if chosen.tenant_gpu_budgets is not None:
        tenants = sorted({m.shape.tenant for m in config.models})
        for tenant in sorted(set(chosen.tenant_gpu_budgets) - set(tenants)):
            raise ValueError(f"{chosen.source}: autoscaling.tenant_gpu_budgets.{tenant}: no model "
                             f"belongs to tenant {tenant!r}; the tenants of {config.source} are "
                             f"{', '.join(map(repr, tenants))}")
        fleet = replace(fleet, tenant_gpu_budgets=dict(chosen.tenant_gpu_budgets))
    if chosen.cluster_gpu_budget is not None:
        fleet = replace(fleet, cluster_gpu_budget=chosen.cluster_gpu_budget[0])
    return replace(config, fleet=fleet)


def with_pools(config: SimConfig, chosen: SimulateSettings) -> SimConfig:
    """``config`` with the settings' pools in place of the models file's fleet: each model's GPU
    product runs on its pool's nodes (name, GPUs a node, ``min_nodes``, ``max_nodes``) at its
    pool's price (the settings hold one pool per product). Refused (ValueError naming the file
    and the pool): a model whose product no pool has, and a replica of more GPUs than its pool's
    node."""
    if chosen.pools is None:
        return config
    where = f"{chosen.source}: pools"
    products = sorted({m.shape.product for m in config.models})
    mine = {pool.product: pool for pool in chosen.pools}
    for model in config.models:
        runs_on = mine.get(model.shape.product)
        if runs_on is None:
            raise ValueError(f"{where}: no pool of {model.shape.product}, the GPU product of "
                             f"model {model.name!r} in {config.source}; the pools' products are "
                             f"{', '.join(sorted(mine)) or 'none'}")
        if model.shape.gpu_share > runs_on.gpus_per_node:
            raise ValueError(f"{where}: {runs_on.name}: a node of gpus_per_node="
                             f"{runs_on.gpus_per_node} cannot hold a replica of model "
                             f"{model.name!r}, {model.shape.gpu_share:g} GPUs ({config.source})")
    shapes = {p: NodeShape(mine[p].name, mine[p].gpus_per_node, mine[p].min_nodes,
                           mine[p].max_nodes) for p in products}
    prices = {**config.fleet.prices, **{p: mine[p].price_per_gpu_hour for p in products}}
    return replace(config, fleet=replace(config.fleet, pools=shapes, prices=prices))
