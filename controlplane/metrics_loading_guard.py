"""Prometheus metrics of the loading guard (``headroom serve --backend kubernetes``): the model
pods it began to hold from voluntary disruption while they load, or let go, by reason, and how
many it holds. Part of the reconcile loop's metrics (``controlplane.metrics``), on its registry.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from controlplane.domain.loading_guard import GuardSync

#: ``headroom_loading_guard_changes`` label pairs (change, reason), each exported from the start
GUARD_CHANGES = (("guard", "loading"), ("release", "ready"), ("release", "loading_too_long"))


class LoadingGuardMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.guard_changes = Counter("headroom_loading_guard_changes", "Model pods the loading "
                                     "guard (headroom serve --backend kubernetes) began to "
                                     "hold from voluntary disruption (change guard, reason "
                                     "loading) or let go (change release, reason ready; or "
                                     "loading_too_long: not ready k8s.loading_guard_max_s "
                                     "after the guard began).", ["change", "reason"],
                                     registry=registry)
        for change, reason in GUARD_CHANGES:
            self.guard_changes.labels(change, reason)
        self.guarded_pods = Gauge("headroom_loading_guard_pods", "Model pods the loading guard "
                                  "holds from voluntary disruption while they load "
                                  "(karpenter.sh/do-not-disrupt, or Cluster Autoscaler's "
                                  "safe-to-evict false) as of its last sync; 0 on a replica "
                                  "that does not lead.", registry=registry)

    def record(self, synced: GuardSync) -> None:
        """Count one sync's changes by change and reason; the pods it guards after it (no
        change when it read nothing)."""
        for change in synced.changes:
            self.guard_changes.labels(change.change, change.why).inc()
        if synced.guarded_pods is not None:
            self.guarded_pods.set(synced.guarded_pods)

    def forget(self) -> None:
        """A replica that does not lead guards nothing."""
        self.guarded_pods.set(0)
