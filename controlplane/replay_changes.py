"""``headroom trace replay --set`` and ``--sweep`` (pure): the operator's changes to serve's
settings file, each a key simulate honours, ``pools`` or a pool's field, with a YAML value; and
the replays they ask for, each a variant of serve's settings."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from controlplane.settings_groups import PoolSettings
from controlplane.simulation.operator_settings import HONOURED, POOLS
from forecaster.errors import InputError

#: the keys ``--set`` changes: the ones simulate honours, and the pools as a whole; a pool's
#: own field is ``pools.<name>.<field>``
CHANGEABLE = frozenset({*HONOURED, POOLS})
POOL_FIELDS = tuple(f for f in PoolSettings.model_fields if f != "name")


def put(doc: dict[str, Any], dotted: str, value: Any) -> None:
    """Set a dotted key in a settings file ``doc`` (a pool by its name: ``pools.l4.max_nodes``)."""
    *path, name = dotted.split(".")
    node = doc
    for part in path:
        node = _pool(node, part) if isinstance(node, list) else node.setdefault(part, {})
    node[name] = value


def _pool(pools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for pool in pools:
        if pool["name"] == name:
            return pool
    raise InputError(f"pools.{name}: no pool named {name!r}; the pools: "
                     f"{', '.join(p['name'] for p in pools)}")


def _check_key(key: str, changes: Mapping[str, Any], option: str) -> None:
    parts = key.split(".")
    if parts[0] == POOLS and len(parts) == 3:
        if parts[2] not in POOL_FIELDS:
            near = difflib.get_close_matches(parts[2], POOL_FIELDS, n=1)
            hint = f"did you mean {near[0]}?" if near else f"its fields: {', '.join(POOL_FIELDS)}"
            raise InputError(f"{option} {key}: not a field of a pool; {hint}")
        if POOLS in changes:
            raise InputError(f"{option} {key}: pools is set as a whole too")
        return
    if key not in CHANGEABLE:
        near = difflib.get_close_matches(key, sorted(CHANGEABLE), n=1)
        hint = (f"did you mean {near[0]}?" if near else
                f"the keys it takes: {', '.join(sorted(CHANGEABLE))}, pools.<name>.<field>")
        raise InputError(f"{option} {key}: not a setting headroom simulate honours; {hint}")
    if key == POOLS and any(k.startswith(f"{POOLS}.") for k in changes):
        raise InputError(f"{option} {key}: a pool's field is set too")


def _yaml_value(option: str, key: str, raw: str) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise InputError(f"{option} {key}: {raw!r} is not a YAML value "
                         f"({getattr(error, 'problem', None) or error})") from None


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
        _check_key(key, changes, "--set")
        changes[key] = _yaml_value("--set", key, raw)
    return changes


def parse_sweep(text: str, changes: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """``--sweep KEY=V1,V2,...``: a key ``--set`` takes and not one it was given, and its
    values, each as written and as YAML (a scalar: the commas part them), each once."""
    key, equals, raw = (part.strip() for part in text.partition("="))
    written = [value.strip() for value in raw.split(",")]
    if not equals or not key or not all(written):
        raise InputError(f"--sweep {text!r}: expected KEY=V1,V2,..., e.g. "
                         "--sweep reconcile.target_utilization=0.7,0.8,0.9")
    _check_key(key, changes, "--sweep")
    if key in changes:
        raise InputError(f"--sweep {key}: --set gives it too")
    twice = sorted({value for value in written if written.count(value) > 1})
    if twice:
        raise InputError(f"--sweep {key}: {', '.join(twice)} given twice")
    return key, tuple((value, _yaml_value("--sweep", key, value)) for value in written)


def value_at(doc: Mapping[str, Any], dotted: str) -> Any:
    """The value of a dotted key in a settings file ``doc``."""
    node: Any = doc
    for part in dotted.split("."):
        node = _pool(node, part) if isinstance(node, list) else node[part]
    return node


def with_changes(doc: Mapping[str, Any], changes: Mapping[str, Any],
                 option: str = "--set") -> dict[str, Any]:
    """A copy of the settings file ``doc`` with ``changes`` (dotted keys) set; a pool's
    field of a pool it does not have is an ``InputError`` naming ``option`` and the pools."""
    out = copy.deepcopy(dict(doc))
    try:
        for key, value in changes.items():
            put(out, key, value)
    except InputError as error:
        raise InputError(f"{option} {error}") from None
    return out


@dataclass(frozen=True, slots=True)
class Variant:
    """One replay on changed settings: its label (the scores' suffix), its changes, the
    settings file and timeline it writes, and the option that asked for it (for errors)."""

    label: str  # "--set", or KEY=VALUE of a sweep
    changes: Mapping[str, Any]
    settings_name: str
    timeline_name: str
    option: str  # --set | --sweep


def variants(changes: Mapping[str, Any],
             sweep: tuple[str, tuple[tuple[str, Any], ...]] | None) -> tuple[Variant, ...]:
    """The replays besides serve's: none, the ``--set`` changes, or a replay a swept value
    (each with the ``--set`` changes too)."""
    if sweep is None:
        return (Variant("--set", changes, "settings.changed.yaml", "changed.csv", "--set"),
                ) if changes else ()
    key, values = sweep
    return tuple(Variant(f"{key}={written}", {**changes, key: value},
                         f"settings.sweep-{i}.yaml", f"sweep-{i}.csv", "--sweep")
                 for i, (written, value) in enumerate(values, 1))
