"""Keep voluntary disruption away from a model replica while it loads (pure).

A model server's replica is worth nothing until its weights are in GPU memory: seconds for a
small model, minutes for a large one (``../shared/data/coldstart``). Karpenter's consolidation
moves pods off an underutilized node, and a replica evicted halfway through its load starts its
load again elsewhere, a cold start paid twice, while its capacity was counted on (LANDSCAPE.md
gap 11: do not consolidate a node in the middle of a model download).

``guard_changes`` decides, each tick, which of the models' pods get
``karpenter.sh/do-not-disrupt: "true"`` (which every voluntary disruption honours) and which
lose it again:
- a pod on a node that is not ready, whose Ready condition turned false (or which started)
  less than ``max_hold_s`` ago, is guarded: it is loading (a first start, or a restart that
  reloads); Headroom marks its own guard with ``headroom.dev/loading-guard`` = when it began;
- a guarded pod that is ready is released, and so is one guarded ``max_hold_s`` or longer (a
  pod that never gets ready, crash-looping or failing to pull, must not hold its node forever);
- a pod that already carries ``karpenter.sh/do-not-disrupt`` without Headroom's mark is
  someone else's choice and is never touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

LOADING_GUARD = "headroom.dev/loading-guard"  # beside do-not-disrupt: when Headroom set it


@dataclass(frozen=True, slots=True)
class ModelPod:
    namespace: str
    name: str
    node: str  # "" when not scheduled
    ready: bool
    loading_since: datetime | None  # its Ready condition's last change, else its start time
    guarded_at: datetime | None  # Headroom's mark: when it began guarding the pod
    do_not_disrupt: bool  # carries karpenter.sh/do-not-disrupt (any value)


@dataclass(frozen=True, slots=True)
class GuardChange:
    namespace: str
    name: str
    guard: bool  # True: set do-not-disrupt and the mark; False: remove both
    reason: str

    @property
    def change(self) -> str:
        return "guard" if self.guard else "release"

    @property
    def why(self) -> str:
        """The reason without its detail: loading, ready or loading_too_long."""
        return self.reason.partition(":")[0]

    def render(self) -> str:
        return f"{self.change} {self.namespace}/{self.name}: {self.reason}"


@dataclass(frozen=True, slots=True)
class GuardSync:
    """One sync of the guard: what it changed, and how many of the models' pods Headroom
    guards after it (None: nothing was read, as on a replica that does not lead)."""

    changes: tuple[GuardChange, ...] = ()
    guarded_pods: int | None = None

    def lines(self) -> tuple[str, ...]:
        return tuple(change.render() for change in self.changes)


def guarded_after(pods: Sequence[ModelPod], applied: Sequence[GuardChange]) -> int:
    """The pods Headroom guards once ``applied`` (the changes written; a pod deleted before its
    change was written is gone, so a release counts as applied either way) have been made."""
    released = sum(1 for change in applied if not change.guard)
    guarded = sum(1 for change in applied if change.guard)
    return sum(1 for pod in pods if pod.guarded_at is not None) - released + guarded


def guard_changes(pods: Sequence[ModelPod], now: datetime,
                  max_hold_s: float) -> list[GuardChange]:
    """The annotations to change on ``pods`` (the pods of the models' workloads) now."""
    changes = []
    for pod in pods:
        if pod.guarded_at is not None:
            held_s = (now - pod.guarded_at).total_seconds()
            if pod.ready:
                changes.append(GuardChange(pod.namespace, pod.name, False, "ready"))
            elif held_s >= max_hold_s:
                changes.append(GuardChange(
                    pod.namespace, pod.name, False,
                    f"loading_too_long: not ready {held_s:.0f} s after the guard began "
                    f"(k8s.loading_guard_max_s {max_hold_s:.0f} s)"))
            continue
        if pod.ready or not pod.node or pod.do_not_disrupt or pod.loading_since is None:
            continue
        loading_s = (now - pod.loading_since).total_seconds()
        if loading_s < max_hold_s:
            changes.append(GuardChange(pod.namespace, pod.name, True,
                                       f"loading: not ready for {max(0.0, loading_s):.0f} s"))
    return changes
