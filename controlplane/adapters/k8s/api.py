"""A thin facade over the official ``kubernetes`` client: dicts in, dicts out, one error taxonomy.

Every write goes through here, with the fixed field manager. Server-side apply forces only the
fields Headroom applies, which it is the authority over (the Kubernetes guidance for controllers:
an unforced conflict would repeat forever); optimistic concurrency comes from the
``resourceVersion`` a read-modify-apply carries, so a concurrent change is a 409
``ConflictError``: re-read and retry on the next tick. In dry-run mode writes are recorded as
``PlannedWrite`` values and never sent; reads still run.

Inside a leader-gated actuator call every request ends by the leader's renew deadline: none is
sent after it, none is waited for past it (``fence.py``: ``LeadershipEnded``, retryable
``not_leader``). Outside one (the reader, the Lease itself) each gets ``timeout_s``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controlplane.adapters.k8s.fence import (
    ENDED,
    LeadershipEnded,
    cut_short,
    fence_retries,
    request_timeout,
)
from controlplane.domain.errors import ConflictError, PermanentError, TransientError

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
JsonObject = dict[str, Any]


class NotFoundError(PermanentError):
    """HTTP 404: the object (or its kind) does not exist."""


class ThrottledError(TransientError):
    """HTTP 429: the server says not now (for evictions: a disruption budget)."""


class RejectedError(PermanentError):
    """HTTP 400/403/422: the request can never succeed as it is (invalid, forbidden)."""


def _message(error: ApiException) -> str:
    try:
        body = json.loads(error.body or "{}")
        text = body.get("message") if isinstance(body, dict) else None
    except ValueError:
        text = None
    return f"HTTP {error.status}: {text or error.reason or 'error'}"


def translate(error: ApiException) -> Exception:
    """Kubernetes API errors -> the control plane's error taxonomy."""
    status = error.status or 0
    if status == 404:
        return NotFoundError(_message(error))
    if status == 409:
        return ConflictError(_message(error))
    if status == 429:
        return ThrottledError(_message(error))
    if status in (400, 401, 403, 405, 415, 422):
        return RejectedError(_message(error))
    return TransientError(_message(error))


@dataclass(frozen=True, slots=True)
class Kind:
    api: str  # attribute of KubeApi holding the typed API
    suffix: str  # typed method suffix: read_<suffix>, patch_<suffix>, ...
    namespaced: bool
    all_namespaces: str = ""  # list_<this> across namespaces


KINDS: dict[tuple[str, str], Kind] = {
    ("v1", "Node"): Kind("core", "node", False),
    ("v1", "Namespace"): Kind("core", "namespace", False),
    ("v1", "Pod"): Kind("core", "namespaced_pod", True, "pod_for_all_namespaces"),
    ("v1", "ConfigMap"): Kind("core", "namespaced_config_map", True,
                              "config_map_for_all_namespaces"),
    ("apps/v1", "Deployment"): Kind("apps", "namespaced_deployment", True,
                                    "deployment_for_all_namespaces"),
    ("apps/v1", "StatefulSet"): Kind("apps", "namespaced_stateful_set", True,
                                     "stateful_set_for_all_namespaces"),
    ("scheduling.k8s.io/v1", "PriorityClass"): Kind("scheduling", "priority_class", False),
    ("policy/v1", "PodDisruptionBudget"): Kind("policy", "namespaced_pod_disruption_budget", True,
                                               "pod_disruption_budget_for_all_namespaces"),
    ("coordination.k8s.io/v1", "Lease"): Kind("coordination", "namespaced_lease", True,
                                              "lease_for_all_namespaces"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"): Kind(
        "autoscaling", "namespaced_horizontal_pod_autoscaler", True,
        "horizontal_pod_autoscaler_for_all_namespaces"),
}
CUSTOM: dict[tuple[str, str], tuple[str, str, str]] = {
    ("karpenter.sh/v1", "NodePool"): ("karpenter.sh", "v1", "nodepools"),
}


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    """A write a dry run would have sent."""

    verb: str  # apply | merge_patch | json_patch | scale | evict | create | replace
    api_version: str
    kind: str
    name: str
    namespace: str
    body: JsonObject = field(default_factory=dict)

    def render(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        body = json.dumps(self.body, sort_keys=True)
        return f"{self.verb} {self.kind} {where}{self.name}: {body}"


def _as_dict(value: Any) -> JsonObject:
    if not isinstance(value, dict):
        raise TransientError(f"unexpected API response: {type(value).__name__}")
    return value


class KubeApi:
    def __init__(self, api_client: client.ApiClient, field_manager: str,
                 timeout_s: float = 10.0, dry_run: bool = False) -> None:
        self.api_client = api_client
        fence_retries(api_client)  # urllib3 retries no request past a leader's deadline
        self.field_manager = field_manager
        self.timeout_s = timeout_s
        self.dry_run = dry_run
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.scheduling = client.SchedulingV1Api(api_client)
        self.policy = client.PolicyV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.autoscaling = client.AutoscalingV2Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self._planned: list[PlannedWrite] = []
        self._lock = threading.Lock()

    # -- plumbing ----------------------------------------------------------------------------
    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> JsonObject:
        """One request; inside a leader-gated call it ends by the leader's deadline (fence.py):
        not sent once it has passed, its timeout cut to the time left (``LeadershipEnded``)."""
        what = getattr(method, "__name__", "request")
        with request_timeout(self.timeout_s, what) as timeout_s:
            try:
                response = method(*args, _preload_content=False, _request_timeout=timeout_s,
                                  **kwargs)
                data = response.data  # the body, too, is read by the deadline
            except ApiException as error:
                raise translate(error) from None
            except (urllib3.exceptions.HTTPError, OSError) as error:
                if cut_short(self.timeout_s, timeout_s, error):
                    raise LeadershipEnded(f"{ENDED}: {what} given up at the deadline "
                                          f"({error})") from None
                raise TransientError(f"kubernetes API unreachable: {error}") from None
        if not data:
            return {}
        try:
            return _as_dict(json.loads(data))
        except ValueError:  # e.g. a login page or proxy where the kubeconfig names the API
            kind = response.headers.get("Content-Type") or "none"
            raise TransientError(f"unexpected API response from "
                                 f"{self.api_client.configuration.host}: not JSON "
                                 f"(Content-Type {kind})") from None

    def _typed(self, api_version: str, kind: str, verb: str, scope_all: bool = False) -> Callable[
            ..., Any]:
        spec = KINDS.get((api_version, kind))
        if spec is None:
            raise PermanentError(f"unsupported kind {kind} in {api_version}")
        suffix = spec.all_namespaces if scope_all and spec.all_namespaces else spec.suffix
        method: Callable[..., Any] = getattr(getattr(self, spec.api), f"{verb}_{suffix}")
        return method

    def _scoped_args(self, api_version: str, kind: str, name: str | None,
                     namespace: str) -> tuple[Any, ...]:
        if (api_version, kind) in CUSTOM:
            return (*CUSTOM[(api_version, kind)], *([name] if name is not None else []))
        namespaced = KINDS[(api_version, kind)].namespaced
        return (*([name] if name is not None else []), *([namespace] if namespaced else []))

    def note(self, write: PlannedWrite) -> JsonObject:
        with self._lock:
            self._planned.append(write)
        return write.body

    def planned_writes(self) -> tuple[PlannedWrite, ...]:
        with self._lock:
            return tuple(self._planned)

    # -- reads -------------------------------------------------------------------------------
    def read(self, api_version: str, kind: str, name: str,
             namespace: str = "") -> JsonObject | None:
        """The object, or None when it does not exist."""
        try:
            if (api_version, kind) in CUSTOM:
                return self._call(self.custom.get_cluster_custom_object,
                                  *self._scoped_args(api_version, kind, name, namespace))
            return self._call(self._typed(api_version, kind, "read"),
                              *self._scoped_args(api_version, kind, name, namespace))
        except NotFoundError:
            return None

    def list(self, api_version: str, kind: str, namespace: str = "", label_selector: str = "",
             field_selector: str = "") -> list[JsonObject]:
        selectors = {k: v for k, v in (("label_selector", label_selector),
                                       ("field_selector", field_selector)) if v}
        if (api_version, kind) in CUSTOM:
            result = self._call(self.custom.list_cluster_custom_object, *CUSTOM[(api_version,
                                                                                 kind)],
                                **selectors)
        elif KINDS.get((api_version, kind), Kind("", "", False)).namespaced and not namespace:
            result = self._call(self._typed(api_version, kind, "list", scope_all=True),
                                **selectors)
        else:
            result = self._call(self._typed(api_version, kind, "list"),
                                *self._scoped_args(api_version, kind, None, namespace),
                                **selectors)
        return [_as_dict(item) for item in result.get("items") or []]

    # -- writes ------------------------------------------------------------------------------
    def apply(self, obj: JsonObject) -> JsonObject:
        """Server-side apply under the fixed field manager, forcing ownership of the applied
        fields; a ``metadata.resourceVersion`` in ``obj`` is a precondition (409 if stale)."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace", "")
        if self.dry_run:
            return self.note(PlannedWrite("apply", api_version, kind, name, namespace, obj))
        args = (*self._scoped_args(api_version, kind, name, namespace), obj)
        method = (self.custom.patch_cluster_custom_object if (api_version, kind) in CUSTOM
                  else self._typed(api_version, kind, "patch"))
        return self._call(method, *args, field_manager=self.field_manager, force=True,
                          _content_type=APPLY)

    def merge_patch(self, api_version: str, kind: str, name: str, patch: JsonObject,
                    namespace: str = "") -> JsonObject:
        if self.dry_run:
            return self.note(PlannedWrite("merge_patch", api_version, kind, name, namespace,
                                             patch))
        args = (*self._scoped_args(api_version, kind, name, namespace), patch)
        method = (self.custom.patch_cluster_custom_object if (api_version, kind) in CUSTOM
                  else self._typed(api_version, kind, "patch"))
        return self._call(method, *args, field_manager=self.field_manager, _content_type=MERGE)

    def json_patch(self, api_version: str, kind: str, name: str,
                   operations: Sequence[JsonObject], namespace: str = "") -> JsonObject:
        """RFC 6902 operations (e.g. replace a list or a map whole, which an apply or a merge
        patch would merge with what other managers set)."""
        if self.dry_run:
            return self.note(PlannedWrite("json_patch", api_version, kind, name, namespace,
                                          {"operations": [*operations]}))
        args = (*self._scoped_args(api_version, kind, name, namespace), [*operations])
        method = (self.custom.patch_cluster_custom_object if (api_version, kind) in CUSTOM
                  else self._typed(api_version, kind, "patch"))
        return self._call(method, *args, field_manager=self.field_manager,
                          _content_type=JSON_PATCH)

    def create(self, obj: JsonObject) -> JsonObject:
        api_version, kind = obj["apiVersion"], obj["kind"]
        name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace", "")
        if self.dry_run:
            return self.note(PlannedWrite("create", api_version, kind, name, namespace, obj))
        args = self._scoped_args(api_version, kind, None, namespace)
        method = (self.custom.create_cluster_custom_object if (api_version, kind) in CUSTOM
                  else self._typed(api_version, kind, "create"))
        return self._call(method, *args, obj, field_manager=self.field_manager)

    def replace(self, obj: JsonObject) -> JsonObject:
        """PUT guarded by ``metadata.resourceVersion`` (a stale one is a ConflictError)."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace", "")
        if self.dry_run:
            return self.note(PlannedWrite("replace", api_version, kind, name, namespace, obj))
        args = self._scoped_args(api_version, kind, name, namespace)
        return self._call(self._typed(api_version, kind, "replace"), *args, obj,
                          field_manager=self.field_manager)

    def scale(self, kind: str, name: str, namespace: str, replicas: int) -> JsonObject:
        """Absolute replicas through the scale subresource (merge patch)."""
        body = {"spec": {"replicas": replicas}}
        if self.dry_run:
            return self.note(PlannedWrite("scale", "apps/v1", kind, name, namespace, body))
        method = (self.apps.patch_namespaced_stateful_set_scale if kind == "StatefulSet"
                  else self.apps.patch_namespaced_deployment_scale)
        return self._call(method, name, namespace, body, field_manager=self.field_manager,
                          _content_type=MERGE)

    def evict(self, name: str, namespace: str) -> None:
        """POST pods/<name>/eviction. Raises ThrottledError on 429 (a disruption budget) and
        NotFoundError when the pod is already gone."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}
        if self.dry_run:
            self.note(PlannedWrite("evict", "v1", "Pod", name, namespace, body))
            return
        self._call(self.core.create_namespaced_pod_eviction, name, namespace, body,
                   field_manager=self.field_manager)

    def delete(self, api_version: str, kind: str, name: str, namespace: str = "") -> None:
        if self.dry_run:
            self.note(PlannedWrite("delete", api_version, kind, name, namespace))
            return
        args = self._scoped_args(api_version, kind, name, namespace)
        if (api_version, kind) in CUSTOM:
            self._call(self.custom.delete_cluster_custom_object, *args)
        else:
            self._call(self._typed(api_version, kind, "delete"), *args)
