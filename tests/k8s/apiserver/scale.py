"""The ``scale`` subresource of Deployments and StatefulSets (``autoscaling/v1`` Scale)."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema

from .objects import ApiError
from .validation import builtin_validator


def read_scale(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                          "creationTimestamp") if k in meta},
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
        "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                   "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))},
    }


def write_scale(obj: dict[str, Any], scale: dict[str, Any]) -> dict[str, Any]:
    """The workload with the Scale's replicas; the Scale's resourceVersion is a precondition."""
    try:
        builtin_validator("autoscaling/v1", "Scale").validate(scale)
    except jsonschema.ValidationError as error:
        where = ".".join(str(p) for p in error.path) or "(root)"
        raise ApiError(422, "Invalid", f"Scale {where}: {error.message}") from None
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or replicas < 0:
        raise ApiError(422, "Invalid", f'Scale "{obj["metadata"]["name"]}" is invalid: '
                       f"spec.replicas: Invalid value: {replicas}: must be greater than or "
                       "equal to 0")
    updated = copy.deepcopy(obj)
    updated.setdefault("spec", {})["replicas"] = replicas
    expected = (scale.get("metadata") or {}).get("resourceVersion")
    if expected:
        updated["metadata"]["resourceVersion"] = expected
    return updated
