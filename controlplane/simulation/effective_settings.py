"""What a ``headroom simulate`` run used, by the settings key ``--config`` sets it with.

Each value is read from the objects the run was built from (the policy, the simulation's options,
the fleet), never from a list of defaults kept by hand, and set beside ``serve``'s default for
the same key (a ``Settings`` group's own default, the environment left out) and where the value
came from. ``simulate`` keeps some defaults of its own (a benchmark's: steps no tick reaches,
full utilization, no profile correction); ``unlike_serve`` names those a run kept although they
differ from ``serve``'s, so a planner who sets nothing does not take the run for ``serve``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from controlplane.autoscaling.policies import ScalingPolicy
from controlplane.autoscaling.profile_correction import CorrectionConfig
from controlplane.domain.demand import PREDICTIVE, REACTIVE
from controlplane.settings import Settings
from controlplane.simulation.engine import SimOptions, pool_specs
from controlplane.simulation.operator_settings import OPTION_SETTINGS, SimulateSettings
from controlplane.simulation.sim_config import SimConfig

#: where a value came from
SIMULATE_DEFAULT = "simulate_default"
CONFIG = "config"
OPTION = "option"
MODELS_FILE = "models_file"
_CORRECTION = "autoscaling.profile_correction"


@dataclass(frozen=True, slots=True)
class _Built:
    policy: ScalingPolicy
    options: SimOptions
    config: SimConfig

    @property
    def predictive(self) -> bool:
        return self.policy.name == PREDICTIVE

    @property
    def guarded(self) -> bool:  # static never scales down: no step, window or budget applies
        return self.policy.name in (PREDICTIVE, REACTIVE)


def _correction(correction: CorrectionConfig | None) -> dict[str, Any]:
    """A profile correction as its settings group says it: off, or on with its values."""
    return {"enabled": False} if correction is None else {"enabled": True, **asdict(correction)}


_Reader = Callable[[_Built], tuple[bool, Any]]  # (the policy reads the key, its value)


def _ladder(field: str) -> _Reader:
    return lambda b: (b.policy.ladder is not None, getattr(b.policy.ladder, field, None))


#: every key ``--config`` sets, and how to read its value off a run's objects
READERS: Mapping[str, _Reader] = {
    "autoscaling.policy": lambda b: (True, b.policy.name),
    "reconcile.interval_s": lambda b: (True, b.options.tick_s),
    "forecast.interval_s": lambda b: (b.predictive, b.options.forecast_interval_s),
    "forecast.method": lambda b: (b.predictive, b.options.forecast_method),
    "forecast.horizon_s": lambda b: (b.predictive, b.options.forecast_horizon_s),
    "forecast.history_s": lambda b: (b.predictive, b.options.forecast_history_s),
    "autoscaling.hint_lead_s": lambda b: (b.predictive, b.options.hint_lead_s),
    _CORRECTION: lambda b: (b.predictive, _correction(b.options.profile_correction)),
    "autoscaling.shortfall_cost_ratio": _ladder("shortfall_cost_ratio"),
    "autoscaling.short_minute_cost_ratio": _ladder("short_minute_cost_ratio"),
    "autoscaling.keep_s": _ladder("keep_s"),
    "autoscaling.reaction_s": _ladder("reaction_s"),
    "reconcile.target_utilization": lambda b: (b.predictive,
                                               b.policy.demand.target_utilization),
    "autoscaling.reactive_target_utilization": lambda b: (
        b.policy.name == REACTIVE, b.policy.demand.target_utilization),
    "reconcile.max_forecast_age_s": lambda b: (b.predictive, b.policy.demand.max_forecast_age_s),
    "reconcile.stale_headroom": lambda b: (b.predictive, b.policy.demand.stale_headroom),
    "safety.max_replica_step": lambda b: (b.guarded, b.policy.replica_limits.max_step),
    "safety.max_node_step": lambda b: (b.guarded, b.policy.pool_limits.max_step),
    "safety.scale_down_stabilization_s": lambda b: (
        b.policy.name == REACTIVE, b.policy.replica_limits.stabilization_s),
    "autoscaling.node_stabilization_s": lambda b: (b.predictive,
                                                   b.policy.pool_limits.stabilization_s),
    "safety.scale_down_cooldown_s": lambda b: (b.guarded, b.policy.replica_limits.cooldown_s),
    "safety.replica_disruption_budget": lambda b: (
        b.guarded, b.policy.replica_limits.disruption_budget),
    "safety.node_disruption_budget": lambda b: (b.guarded,
                                                b.policy.pool_limits.disruption_budget),
    "safety.disruption_window_s": lambda b: (b.guarded,
                                             b.policy.replica_limits.disruption_window_s),
    "safety.cluster_gpu_budget": lambda b: (True, b.config.fleet.cluster_gpu_budget),
    "autoscaling.tenant_gpu_budgets": lambda b: (True, dict(b.config.fleet.tenant_gpu_budgets)),
}


def serve_default(key: str) -> Any:
    """``serve``'s default of a dotted settings key: its group's own default, not the
    environment's (a profile correction as ``_correction`` says it)."""
    group, *rest = key.split(".")
    value: Any = Settings.model_fields[group].get_default(call_default_factory=True)
    for part in rest:
        value = getattr(value, part)
    if key == _CORRECTION:
        fields = value.model_dump()
        return ({"enabled": False} if not fields.pop("enabled")
                else _correction(CorrectionConfig(**fields)))
    return value


def sources(chosen: SimulateSettings | None, given_options: Iterable[str],
            config: SimConfig) -> dict[str, str]:
    """Where each key's value came from, when not simulate's default: ``given_options`` are
    the command line's options by parameter name (``profile_correction`` too), ``chosen`` the
    settings file's keys, ``config`` the models file (GPU budgets)."""
    out: dict[str, str] = {}
    fleet = config.fleet
    if fleet.cluster_gpu_budget is not None:
        out["safety.cluster_gpu_budget"] = MODELS_FILE
    if fleet.tenant_gpu_budgets:
        out["autoscaling.tenant_gpu_budgets"] = MODELS_FILE
    out |= dict.fromkeys(chosen.taken if chosen is not None else (), CONFIG)
    options = {**OPTION_SETTINGS, "profile_correction": _CORRECTION}
    out |= {options[name]: OPTION for name in given_options if name in options}
    return out


def effective_settings(policy: ScalingPolicy, options: SimOptions, config: SimConfig,
                       came_from: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Every key the policy reads: ``value`` (what the run used), ``serve_default`` and
    ``from`` (``simulate_default``, ``config``, ``option`` or ``models_file``)."""
    built = _Built(policy, options, config)
    out = {}
    for key, reader in READERS.items():
        read, value = reader(built)
        if read:
            out[key] = {"value": value, "serve_default": serve_default(key),
                        "from": came_from.get(key, SIMULATE_DEFAULT)}
    return out


def unlike_serve(by_policy: Mapping[str, Mapping[str, Mapping[str, Any]]]
                 ) -> dict[str, dict[str, Any]]:
    """The keys whose value is simulate's default and not ``serve``'s: key -> policy -> value."""
    out: dict[str, dict[str, Any]] = {}
    for policy, settings in by_policy.items():
        for key, used in settings.items():
            if used["from"] == SIMULATE_DEFAULT and used["value"] != used["serve_default"]:
                out.setdefault(key, {})[policy] = used["value"]
    return out


def _text(value: Any) -> str:
    if isinstance(value, dict) and "enabled" in value:
        return "on" if value["enabled"] else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def unlike_serve_note(unlike: Mapping[str, Mapping[str, Any]]) -> str | None:
    """One ``note:`` line naming ``unlike_serve``'s keys (a value per policy where the policies
    differ), or None when there are none."""
    if not unlike:
        return None
    parts = []
    for key, values in unlike.items():
        shown = {_text(v) for v in values.values()}
        used = (shown.pop() if len(shown) == 1
                else ", ".join(f"{p} {_text(v)}" for p, v in values.items()))
        parts.append(f"{key} ({used}; serve {_text(serve_default(key))})")
    return (f"simulate's defaults differ from serve's for {', '.join(parts)}; set them in a "
            "--config file to simulate serve's")


def pools_used(config: SimConfig, chosen: SimulateSettings | None) -> list[dict[str, Any]]:
    """The simulated fleet's pools, one per GPU product of the models, as ``--json`` gives
    them: name, product, node size and bounds, price and where they came from (``config``: the
    settings' ``pools``, else ``models_file``: its fleet, simulate's defaults where it is
    silent)."""
    came_from = CONFIG if chosen is not None and chosen.pools is not None else MODELS_FILE
    return [{"name": pool.name, "product": pool.product, "gpus_per_node": pool.gpus_per_node,
             "min_nodes": pool.min_nodes, "max_nodes": pool.max_nodes,
             "usd_per_gpu_hour": pool.price_per_gpu_hour, "from": came_from}
            for pool in pool_specs(config)]
