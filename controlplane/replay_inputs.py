"""``headroom trace replay``'s inputs from what the store holds (pure): the models file of the
replayed models, each replica credited with what the loop's fleet reported it to serve, the
settings file of serve's values of every key simulate honours, with serve's pools, and that file
with the operator's ``--set`` changes."""

from __future__ import annotations

import copy
import difflib
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel

from controlplane.domain.models import ModelSpec
from controlplane.models_file import as_models_file
from controlplane.settings import Settings
from controlplane.settings_groups import PoolSettings
from controlplane.simulation.engine import MinuteRow
from controlplane.simulation.operator_settings import HONOURED, POOLS, setting_value
from forecaster.errors import InputError

#: the keys ``--set`` changes: the ones simulate honours, and the pools as a whole; a pool's
#: own field is ``pools.<name>.<field>``
CHANGEABLE = frozenset({*HONOURED, POOLS})
POOL_FIELDS = tuple(f for f in PoolSettings.model_fields if f != "name")


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
    sim = settings.sim
    true_start_s = uniform_sum_quantiles((sim.image_pull_s, sim.weight_load_s, sim.warmup_s),
                                         (0.5, 0.9))
    for entry in doc["models"]:
        if entry["name"] in reported_rps:
            entry["true_per_replica_rps"] = reported_rps[entry["name"]]
        if simulated_fleet:
            entry["true_cold_start"] = {"p50_s": true_start_s[0], "p90_s": true_start_s[1]}
    if simulated_fleet:
        doc["fleet"] = {"node_provision_s": dict(zip(
            ("p50", "p90"), uniform_sum_quantiles((sim.node_provision_s,), (0.5, 0.9)),
            strict=True))}
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
        _put(out, key, _plain(setting_value(settings, key)))
    return out


def pool_prices(doc: Mapping[str, Any]) -> dict[str, float]:
    """USD per GPU-hour by GPU product of a settings file's pools (one pool a product)."""
    return {pool["product"]: pool["price_per_gpu_hour"] for pool in doc[POOLS]}


def _put(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *path, name = dotted.split(".")
    node = doc
    for part in path:
        node = _pool(node, part) if isinstance(node, list) else node.setdefault(part, {})
    node[name] = value


def _pool(pools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for pool in pools:
        if pool["name"] == name:
            return pool
    raise InputError(f"--set pools.{name}: no pool named {name!r}; the pools: "
                     f"{', '.join(p['name'] for p in pools)}")


def _check_key(key: str, changes: Mapping[str, Any]) -> None:
    parts = key.split(".")
    if parts[0] == POOLS and len(parts) == 3:
        if parts[2] not in POOL_FIELDS:
            near = difflib.get_close_matches(parts[2], POOL_FIELDS, n=1)
            hint = f"did you mean {near[0]}?" if near else f"its fields: {', '.join(POOL_FIELDS)}"
            raise InputError(f"--set {key}: not a field of a pool; {hint}")
        if POOLS in changes:
            raise InputError(f"--set {key}: pools is set as a whole too")
        return
    if key not in CHANGEABLE:
        near = difflib.get_close_matches(key, sorted(CHANGEABLE), n=1)
        hint = (f"did you mean {near[0]}?" if near else
                f"the keys it takes: {', '.join(sorted(CHANGEABLE))}, pools.<name>.<field>")
        raise InputError(f"--set {key}: not a setting headroom simulate honours; {hint}")
    if key == POOLS and any(k.startswith(f"{POOLS}.") for k in changes):
        raise InputError(f"--set {key}: a pool's field is set too")


def parse_changes(given: Sequence[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` options as ``{KEY: VALUE}``: each KEY one simulate honours,
    ``pools`` or a pool's field (``pools.l4.max_nodes``), given once; each VALUE read as YAML
    (``600``, ``true``, ``{team-a: 8}``)."""
    changes: dict[str, Any] = {}
    for text in given:
        key, equals, raw = (part.strip() for part in text.partition("="))
        if not equals or not key or not raw:
            raise InputError(f"--set {text!r}: expected KEY=VALUE, e.g. "
                             "--set autoscaling.keep_s=600")
        if key in changes:
            raise InputError(f"--set {key}: given twice")
        _check_key(key, changes)
        try:
            changes[key] = yaml.safe_load(raw)
        except yaml.YAMLError as error:
            raise InputError(f"--set {key}: {raw!r} is not a YAML value "
                             f"({getattr(error, 'problem', None) or error})") from None
    return changes


def value_at(doc: Mapping[str, Any], dotted: str) -> Any:
    """The value of a dotted key in a settings file ``doc``."""
    node: Any = doc
    for part in dotted.split("."):
        node = _pool(node, part) if isinstance(node, list) else node[part]
    return node


def with_changes(doc: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the settings file ``doc`` with ``changes`` (dotted keys) set; a pool's
    field of a pool it does not have is an ``InputError`` naming its pools."""
    out = copy.deepcopy(dict(doc))
    for key, value in changes.items():
        _put(out, key, value)
    return out
