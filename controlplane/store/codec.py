"""JSON codecs for the values stored as documents (observed state, guard memory, forecasts)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from controlplane.domain.guards import Change, GuardMemory, Recommendation
from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.domain.observed import (
    ObservedGpu,
    ObservedModel,
    ObservedNode,
    ObservedPool,
    ObservedState,
    ServingWorkload,
)
from controlplane.domain.plan import KeptReplicas
from controlplane.domain.profile import ProfileCorrection
from scheduler.domain import catalog


def _default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def observed_to_json(observed: ObservedState) -> str:
    return json.dumps(asdict(observed), default=_default, separators=(",", ":"))


def _observed_model(raw: dict[str, Any]) -> ObservedModel:
    """A stored model; one stored before several workloads were kept has the one labelled with
    it (if any) as ``workload`` and ``gpu_requests``."""
    fields = dict(raw)
    one, asked = fields.pop("workload", ""), fields.pop("gpu_requests", ())
    listed = fields.pop("workloads", [{"name": one, "gpu_requests": asked}] if one else [])
    return ObservedModel(**fields, workloads=tuple(
        ServingWorkload(str(w["name"]), tuple((str(r), int(c)) for r, c in w["gpu_requests"]),
                        w.get("stop_grace_s"), w.get("pre_stop"))
        for w in listed))


def observed_from_json(text: str) -> ObservedState:
    raw: dict[str, Any] = json.loads(text)
    def gpu(g: dict[str, Any]) -> ObservedGpu:
        return ObservedGpu(**{**g, "mig_layout": tuple(g["mig_layout"])})

    nodes = tuple(
        ObservedNode(**{**n, "gpus": tuple(gpu(g) for g in n["gpus"]),
                        "labels": tuple(tuple(kv) for kv in n.get("labels", ())),
                        "undrained_gpu_pods": tuple(n.get("undrained_gpu_pods", ()))})
        for n in raw["nodes"]
    )
    return ObservedState(
        synced_at=datetime.fromisoformat(raw["synced_at"]),
        pools=tuple(ObservedPool(**p) for p in raw["pools"]),
        nodes=nodes,
        models=tuple(_observed_model(m) for m in raw["models"]),
        synced=raw.get("synced", True),
        notes=tuple(raw.get("notes", ())),
        data_at=datetime.fromisoformat(raw["data_at"]) if raw.get("data_at") else None,
    )


def guard_memory_to_json(memory: GuardMemory) -> str:
    """Recommendations and allowed changes per target (cooldowns and disruption budgets), and
    the corrected profiles in use."""
    return json.dumps({
        "history": [[target, [[r.at.isoformat(), r.value] for r in history]]
                    for target, history in memory.history],
        "changes": [[target, [[c.at.isoformat(), c.delta] for c in changes]]
                    for target, changes in memory.changes],
        "profile_rps": [[model, rps] for model, rps in memory.profile_rps],
    }, separators=(",", ":"))


def guard_memory_from_json(text: str) -> GuardMemory:
    raw: dict[str, list[list[Any]]] | list[list[Any]] = json.loads(text)
    if isinstance(raw, list):  # written before changes were stored
        raw = {"history": raw, "changes": []}
    return GuardMemory(
        history=tuple(
            (target, tuple(Recommendation(datetime.fromisoformat(at), int(v))
                           for at, v in history))
            for target, history in raw["history"]),
        changes=tuple(
            (target, tuple(Change(datetime.fromisoformat(at), int(d)) for at, d in changes))
            for target, changes in raw.get("changes", [])),
        profile_rps=tuple((str(model), float(rps)) for model, rps in raw.get("profile_rps", [])),
    )


def profiles_to_json(profiles: tuple[ProfileCorrection, ...]) -> str:
    return json.dumps([asdict(p) for p in profiles], separators=(",", ":"))


def profiles_from_json(text: str | None) -> tuple[ProfileCorrection, ...]:
    """None (a tick stored before migration 0005): no profiles recorded."""
    return tuple(ProfileCorrection(**p) for p in json.loads(text)) if text else ()


def notes_to_json(notes: Sequence[str]) -> str | None:
    """A forecast's notes as stored (``forecasts.notes_json``): None when there are none, as on
    the forecasts stored before migration 0023."""
    return json.dumps(list(notes)) if notes else None


def notes_from_json(text: str | None) -> tuple[str, ...]:
    """None (no notes, or a forecast stored before migration 0023): ()."""
    return tuple(str(note) for note in json.loads(text)) if text else ()


def kept_to_json(kept: Sequence[KeptReplicas], tenant_of: Mapping[str, str]) -> str:
    """A plan's replicas running beyond its placement as stored (``plans.kept_json``), each with
    its model's tenant of now (None: not listed), as placements keep theirs."""
    return json.dumps([{"model": k.model, "tenant": tenant_of.get(k.model),
                        "product": k.product, "replicas": k.replicas,
                        "gpu_share": k.gpu_share} for k in kept])


def kept_from_json(text: str | None) -> tuple[tuple[KeptReplicas, str | None], ...]:
    """Each kept-replicas entry with its stored tenant; None (a plan stored before migration
    0024): none known."""
    return tuple((KeptReplicas(str(k["model"]), int(k["replicas"]), str(k["product"]),
                               float(k["gpu_share"])),
                  None if k.get("tenant") is None else str(k["tenant"]))
                 for k in json.loads(text)) if text else ()


def profile_to_json(profile: tuple[ProfilePoint, ...]) -> str:
    return json.dumps([asdict(p) for p in profile], separators=(",", ":"))


def spec_from_columns(name: str, tenant: str, isolation: str, engine: str, latency_slo_ms: float,
                      cold_p50_s: float, cold_p90_s: float, profile_json: str,
                      min_replicas: int | None = None,
                      max_replicas: int | None = None) -> ModelSpec:
    return ModelSpec(
        name=name, tenant=tenant, isolation=Isolation(isolation), engine=Engine(engine),
        latency_slo_ms=latency_slo_ms,
        profile=tuple(_catalog_named(ProfilePoint(**p)) for p in json.loads(profile_json)),
        cold_start=ColdStart(cold_p50_s, cold_p90_s),
        min_replicas=min_replicas, max_replicas=max_replicas,
    )


def _catalog_named(point: ProfilePoint) -> ProfilePoint:
    """``point`` with its product's catalog name: an import before the models file held it
    stored the alias or GFD label it was given (``NVIDIA-L4``), which no pool's product matches."""
    known = catalog.lookup(point.product)
    return point if known is None or known.name == point.product else replace(
        point, product=known.name)
