"""PodDisruptionBudgets and the eviction subresource: an eviction that would take a budget below
its floor gets HTTP 429; a pod covered by two budgets gets HTTP 500 (as the real API server)."""

from __future__ import annotations

import math
from typing import Any

from .objects import ApiError, ObjectStore
from .resources import BY_PATH
from .selectors import matches_label_selector
from .validation import Invalid, validate_object

PODS = BY_PATH[("", "v1", "pods")]
PDBS = BY_PATH[("policy", "v1", "poddisruptionbudgets")]
SCALABLE = {"Deployment": BY_PATH[("apps", "v1", "deployments")],
            "StatefulSet": BY_PATH[("apps", "v1", "statefulsets")]}


def is_pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(total * int(value[:-1]) / 100)
    return int(value)


def _covered_pods(store: ObjectStore, pdb: dict[str, Any]) -> list[dict[str, Any]]:
    namespace = pdb["metadata"]["namespace"]
    selector = (pdb.get("spec") or {}).get("selector")
    pods, _ = store.list(PODS, namespace, lambda p: matches_label_selector(
        selector, p["metadata"].get("labels") or {}))
    return [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded",
                                                                              "Failed")]


def _expected_pods(store: ObjectStore, namespace: str, pods: list[dict[str, Any]]) -> int:
    """Like the disruption controller: the scale of the pods' controllers when they have one
    (simplification: pods name their Deployment/StatefulSet directly), else the pods seen."""
    owners = {(ref["kind"], ref["name"]) for pod in pods
              for ref in pod["metadata"].get("ownerReferences") or [] if ref["kind"] in SCALABLE}
    expected = 0
    for kind, name in sorted(owners):
        if not store.exists(SCALABLE[kind], namespace, name):
            return len(pods)
        expected += int(store.get(SCALABLE[kind], namespace, name)["spec"].get("replicas", 1))
    return expected if owners else len(pods)


def pdb_status(store: ObjectStore, pdb: dict[str, Any]) -> dict[str, Any]:
    """The status a disruption controller would write, computed from the pods right now."""
    pods = _covered_pods(store, pdb)
    spec = pdb.get("spec") or {}
    expected = _expected_pods(store, pdb["metadata"]["namespace"], pods)
    healthy = sum(1 for p in pods if is_pod_ready(p))
    if "minAvailable" in spec:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = max(0, expected - _scaled(spec.get("maxUnavailable", 0), expected))
    return {"currentHealthy": healthy, "desiredHealthy": desired,
            "disruptionsAllowed": max(0, healthy - desired), "expectedPods": expected,
            "observedGeneration": pdb["metadata"].get("generation", 1)}


def install(store: ObjectStore) -> None:
    store.computed_status["PodDisruptionBudget"] = lambda pdb: pdb_status(store, pdb)


def evict(store: ObjectStore, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST pods/<name>/eviction: delete the pod unless a disruption budget forbids it."""
    if body.get("kind") not in (None, "Eviction"):
        raise ApiError(400, "BadRequest", "eviction body must be an Eviction")
    if (body.get("metadata") or {}).get("name") != name:
        raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
    try:  # policy/v1 Eviction: kubernetes-validate's strict schema (REFERENCE.md §9)
        validate_object({"apiVersion": "policy/v1", "kind": "Eviction", **body})
    except Invalid as error:
        raise ApiError(422, "Invalid", f'Eviction "{name}" is invalid: {error}') from None
    with store.lock:
        pod = store.get(PODS, namespace, name)
        labels = pod["metadata"].get("labels") or {}
        budgets, _ = store.list(PDBS, namespace, lambda b: matches_label_selector(
            (b.get("spec") or {}).get("selector"), labels))
        if len(budgets) > 1:
            raise ApiError(500, "InternalError", "This pod has more than one "
                           "PodDisruptionBudget, which the eviction subresource does not support.")
        if budgets and is_pod_ready(pod):
            status = budgets[0]["status"]
            if status["disruptionsAllowed"] <= 0:
                budget = budgets[0]["metadata"]["name"]
                raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate "
                               "the pod's disruption budget.", {"causes": [{
                                   "reason": "DisruptionBudget",
                                   "message": f"The disruption budget {budget} needs "
                                   f"{status['desiredHealthy']} healthy pods and has "
                                   f"{status['currentHealthy']} currently"}]})
        store.delete(PODS, namespace, name)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}
