"""The reconcile loop's config from settings (``ReconcileConfig``, with its calibration, node
config and profile correction parts), and the checks that the tenants and models the settings
name are those of the fleet's models.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from controlplane.autoscaling.from_settings import budgets_from_settings, policy_from_settings
from controlplane.autoscaling.live import cold_wake_s, live_models
from controlplane.autoscaling.profile_correction import CorrectionConfig
from controlplane.domain.models import ModelSpec
from controlplane.domain.node_plan import NodeConfigLimits
from controlplane.forecast_calibration import CalibrationConfig
from controlplane.forecast_refresh import check_state_dir
from controlplane.reconcile import ReconcileConfig
from controlplane.settings import AutoscalingSettings, ConfigError, Settings, pool_specs


def reconcile_config(settings: Settings, specs: tuple[ModelSpec, ...]) -> ReconcileConfig:
    """The reconcile loop runs the autoscaling core with the policy of ``settings.autoscaling``."""
    auto, pools = settings.autoscaling, pool_specs(settings)
    check_models_table(settings, specs)
    check_state_dir(settings.forecast.state_dir)
    return ReconcileConfig(
        models=live_models(specs, pools, auto.node_provision_p90_s, auto.cached_start_p90_s),
        pools=pools,
        policy=policy_from_settings(settings, cold_wake_s(specs, auto.node_provision_p90_s),
                                    peak_rps=auto.static_peak_rps,
                                    next_wake_s=auto.cached_start_p90_s),
        budgets=budgets_from_settings(settings),
        max_staleness_s=settings.reconcile.max_staleness_s,
        dry_run=settings.safety.dry_run,
        calibration=calibration_config(settings),
        node_configs=node_config_limits(settings),
        profile_correction=correction_config(settings),
        hint_lead_s=auto.hint_lead_s,
        mig_strategy=settings.k8s.mig_strategy,
    )


def correction_config(settings: Settings) -> CorrectionConfig | None:
    """The online profile correction of ``autoscaling.profile_correction``; None when off."""
    pc = settings.autoscaling.profile_correction
    if not pc.enabled:
        return None
    return CorrectionConfig(window_s=pc.window_s, min_samples=pc.min_samples,
                            min_load_share=pc.min_load_share, safety=pc.safety,
                            min_factor=pc.min_factor, max_factor=pc.max_factor)


def node_config_limits(settings: Settings) -> NodeConfigLimits | None:
    rec = settings.reconcile
    return (NodeConfigLimits(rec.relayouts_in_flight, rec.relayout_settle_s)
            if rec.node_configs else None)


def check_budget_tenants(budgets: Mapping[str, float], specs: tuple[ModelSpec, ...]) -> None:
    """A budget for a tenant no model belongs to would never bind: most likely a misspelt name,
    which would leave the real tenant without a limit."""
    tenants = sorted({s.tenant for s in specs})
    unknown = sorted(set(budgets) - set(tenants))
    if unknown:
        raise ConfigError(f"autoscaling.tenant_gpu_budgets: no model belongs to tenant(s) "
                          f"{', '.join(map(repr, unknown))}; the models' tenants are "
                          f"{', '.join(map(repr, tenants))}")


def check_models_table(settings: Settings, specs: tuple[ModelSpec, ...]) -> None:
    """ConfigError when serve of ``settings`` refuses ``specs`` as the models table's set: at
    start, at each reload (``models_in_use.models_change``: the models in use stay) and, before
    they write, ``models import`` / ``models remove`` with ``--config`` (so that what they
    write is what a running serve uses). No model at all, or a tenant or model ``autoscaling``
    names that the set lacks (``check_autoscaling_models``)."""
    if not specs:
        raise ConfigError("the store lists no models")
    check_autoscaling_models(settings.autoscaling, specs)
    if settings.backend == "kubernetes" and not settings.k8s.device_plugin_mps:
        check_no_device_plugin_mps(specs)


def check_no_device_plugin_mps(specs: tuple[ModelSpec, ...]) -> None:
    """A whole-GPU MPS point (``mps_processes`` > 1 on a whole GPU: one device-plugin MPS share
    per replica) cannot run where the device plugin refuses MPS (``k8s.device_plugin_mps``
    false); a plan from it would never be actuated. MPS inside a MIG instance runs under the
    replica's own daemon and stays."""
    found = [f"{spec.name!r} profile[{k}] ({point.product}, whole GPU, {point.mps_processes} "
             "MPS processes)" for spec in specs for k, point in enumerate(spec.profile)
             if point.compute_slices == 0 and point.mps_processes > 1]
    if found:
        raise ConfigError(
            f"model {found[0]}{f' and {len(found) - 1} more point(s)' if len(found) > 1 else ''}"
            ": whole-GPU MPS needs the device plugin's MPS, which it refuses under the GPU "
            "Operator's mixed MIG strategy; remove the point(s), or set k8s.device_plugin_mps "
            "true on a cluster whose ClusterPolicy mig.strategy is none")


def check_autoscaling_models(auto: AutoscalingSettings, specs: tuple[ModelSpec, ...]) -> None:
    """The tenants and models ``autoscaling`` names are those of ``specs``: its GPU budgets'
    tenants and its static peaks' models (``check_budget_tenants``, ``check_static_peaks``)."""
    check_budget_tenants(auto.tenant_gpu_budgets, specs)
    check_static_peaks(auto, specs)


def check_static_peaks(auto: AutoscalingSettings, specs: tuple[ModelSpec, ...]) -> None:
    """A peak for a model that does not exist would never apply: most likely a misspelt name,
    which would leave the real model sized without its peak (``no_static_peak``, observed load
    x stale_headroom). The static policy needs every model's peak."""
    models = sorted(s.name for s in specs)
    unknown = sorted(set(auto.static_peak_rps) - set(models))
    if unknown:
        near = {n: difflib.get_close_matches(n, models, n=1) for n in unknown}
        named = ", ".join(f"{n!r} (did you mean {near[n][0]!r}?)" if near[n] else repr(n)
                          for n in unknown)
        raise ConfigError(f"autoscaling.static_peak_rps: no model named {named}; the models are "
                          f"{', '.join(map(repr, models))}")
    missing = sorted(set(models) - set(auto.static_peak_rps))
    if auto.policy == "static" and missing:
        raise ConfigError(f"autoscaling.static_peak_rps: policy static needs the peak rps of "
                          f"every model; none for {', '.join(map(repr, missing))}")


def calibration_config(settings: Settings) -> CalibrationConfig:
    auto = settings.autoscaling
    return CalibrationConfig(auto.calibration_window_s, auto.calibration_errors)
