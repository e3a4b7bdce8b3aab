"""The resource types the test API server speaks, and how a request path maps onto them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str  # "" = the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _r(group: str, version: str, plural: str, kind: str, namespaced: bool,
       *subresources: str) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, frozenset(subresources))


RESOURCES: tuple[ResourceType, ...] = (
    _r("", "v1", "namespaces", "Namespace", False, "status"),
    _r("", "v1", "nodes", "Node", False, "status"),
    _r("", "v1", "pods", "Pod", True, "status", "eviction"),
    _r("", "v1", "configmaps", "ConfigMap", True),
    _r("", "v1", "services", "Service", True, "status"),
    _r("", "v1", "serviceaccounts", "ServiceAccount", True),
    _r("apps", "v1", "deployments", "Deployment", True, "status", "scale"),
    _r("apps", "v1", "statefulsets", "StatefulSet", True, "status", "scale"),
    _r("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, "status"),
    _r("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True,
       "status"),
    _r("coordination.k8s.io", "v1", "leases", "Lease", True),
    _r("karpenter.sh", "v1", "nodepools", "NodePool", False, "status"),
)

BY_PATH: dict[tuple[str, str, str], ResourceType] = {
    (r.group, r.version, r.plural): r for r in RESOURCES}
BY_KIND: dict[tuple[str, str], ResourceType] = {(r.api_version, r.kind): r for r in RESOURCES}


@dataclass(frozen=True, slots=True)
class Route:
    """A parsed request path: the resource, namespace ('' for cluster scope or all
    namespaces), object name ('' for the collection) and subresource ('' for none)."""

    resource: ResourceType
    namespace: str
    name: str
    subresource: str


class RouteError(Exception):
    pass


def parse_path(path: str) -> Route:
    """Map ``/api/v1/...`` or ``/apis/<group>/<version>/...`` onto a resource route."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise RouteError(f"the server could not find the requested resource: {path}")
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise RouteError(f"the server could not find the requested resource: {path}")
    resource = BY_PATH.get((group, version, rest[0]))
    if resource is None:
        raise RouteError(f"the server could not find the requested resource: {path}")
    if namespace and not resource.namespaced:
        raise RouteError(f"{resource.kind} is not namespaced: {path}")
    name = rest[1] if len(rest) >= 2 else ""
    sub = rest[2] if len(rest) == 3 else ""
    if sub and sub not in resource.subresources:
        raise RouteError(f"{resource.plural} has no subresource {sub!r}")
    return Route(resource, namespace, name, sub)
