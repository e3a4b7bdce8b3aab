"""``headroom trace replay``'s inputs from what the store holds (pure): the models file of the
replayed models, each replica credited with what the loop's fleet reported it to serve, and the
settings file of serve's values of every key simulate honours, with serve's pools."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from controlplane.domain.models import ModelSpec
from controlplane.models_file import as_models_file
from controlplane.replay_changes import put
from controlplane.settings import Settings
from controlplane.simulation.engine import MinuteRow
from controlplane.simulation.operator_settings import HONOURED, POOLS, setting_value


def reported_replica_rps(rows: Sequence[MinuteRow]) -> dict[str, float]:
    """Per model, the median requests/s a ready replica was credited with in the loop's minutes
    (the fleet's observed capacity over its ready replicas; minutes without one left out)."""
    seen: dict[str, list[float]] = {}
    for row in rows:
        if row.ready_replicas > 0:
            seen.setdefault(row.model, []).append(row.per_replica_rps)
    return {model: statistics.median(values) for model, values in seen.items()}


def replay_models_file(specs: Sequence[ModelSpec], reported_rps: Mapping[str, float],
                       settings: Settings, simulated_fleet: bool) -> dict[str, Any]:
    """The models file of ``specs`` (``headroom models list --yaml``'s), each model's
    ``true_per_replica_rps`` what its replicas were reported to serve, where they were: so a
    simulated replica serves what the loop's did, and the recorded and the simulated minutes
    are scored alike. A simulated fleet's (the demo's) nodes take ``sim.node_provision_s``
    (uniform: p50 its middle, p90 nine tenths of the way), a real fleet's simulate's default;
    its replicas start as its own do (``true_cold_start``: an image pull, a weight load and a
    warm-up, each uniform), while the policies plan with each model's spec, as the loop did."""
    doc = as_models_file(specs)
    for entry in doc["models"]:
        if entry["name"] in reported_rps:
            entry["true_per_replica_rps"] = reported_rps[entry["name"]]
    if simulated_fleet:
        sim = settings.sim
        p50_s, p90_s = uniform_sum_quantiles(
            (sim.image_pull_s, sim.weight_load_s, sim.warmup_s), (0.5, 0.9))
        for entry in doc["models"]:
            entry["true_cold_start"] = {"p50_s": p50_s, "p90_s": p90_s}
        p50_s, p90_s = uniform_sum_quantiles((sim.node_provision_s,), (0.5, 0.9))
        doc["fleet"] = {"node_provision_s": {"p50": p50_s, "p90": p90_s}}
    return doc


def uniform_sum_quantiles(ranges: Sequence[tuple[float, float]], quantiles: Sequence[float],
                          step_s: float = 0.01) -> tuple[float, ...]:
    """Quantiles of a sum of independent uniform durations (each ``(low_s, high_s)``), to
    ``step_s``: the densities convolved on a grid of that step."""
    density = np.ones(1)
    for low_s, high_s in ranges:
        cells = max(1, round((high_s - low_s) / step_s))
        density = np.convolve(density, np.full(cells, 1.0 / cells))
    cdf = np.cumsum(density)
    start_s = sum(low_s for low_s, _ in ranges)
    width_s = sum(high_s - low_s for low_s, high_s in ranges)
    # cell i holds (i, i + 1] grid steps of the span; a quantile's cell, interpolated within it
    cells_s = width_s / len(density) if width_s else 0.0
    return tuple(round(start_s + cells_s * float(np.interp(q, np.concatenate(([0.0], cdf)),
                                                           np.arange(len(cdf) + 1))), 2)
                 for q in quantiles)


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def replay_settings(settings: Settings) -> dict[str, Any]:
    """``settings``' value of every key ``headroom simulate --config`` honours, and its pools,
    as a settings file: the replay runs with serve's values, not simulate's defaults."""
    out: dict[str, Any] = {POOLS: [_plain(pool) for pool in settings.pools]}
    for key in sorted(HONOURED):
        put(out, key, _plain(setting_value(settings, key)))
    return out


def pool_prices(doc: Mapping[str, Any]) -> dict[str, float]:
    """USD per GPU-hour by GPU product of a settings file's pools (one pool a product)."""
    return {pool["product"]: pool["price_per_gpu_hour"] for pool in doc[POOLS]}
