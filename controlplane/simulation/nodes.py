"""The simulated fleet's nodes and replicas, and the two placement rules it uses."""

from __future__ import annotations

from dataclasses import dataclass, field

EPS = 1e-9


@dataclass(slots=True, eq=False)
class SimNode:
    name: str
    pool: str
    requested_s: float
    ready_s: float
    free: list[float]  # free share per GPU
    cached_s: dict[str, float] = field(default_factory=dict)  # model -> weights on disk from
    draining: bool = False

    def used(self) -> float:
        return len(self.free) - sum(self.free)


@dataclass(slots=True, eq=False)
class SimReplica:
    model: str
    node: SimNode | None = None
    gpus: tuple[int, ...] = ()
    held: float = 0.0  # share held on each of its GPUs
    ready_s: float | None = None  # serves (hot) or is loaded (idle) from then on
    successor: SimReplica | None = None  # its replacement while its node drains


def gpu_slots(node: SimNode, share: float) -> tuple[int, ...] | None:
    """GPUs on ``node`` for one replica of ``share``: the fullest GPU it fits on (best fit), or
    ``round(share)`` empty GPUs for a multi-GPU replica; None when it does not fit."""
    if share > 1:
        whole = [i for i, f in enumerate(node.free) if f >= 1 - EPS]
        return tuple(whole[: round(share)]) if len(whole) >= round(share) else None
    fitting = [(f, i) for i, f in enumerate(node.free) if f >= share - EPS]
    return (min(fitting)[1],) if fitting else None


def removal_order(replica: SimReplica, now_s: float) -> tuple[int, float, float]:
    """Sort key for replicas to stop: unbound first, then still loading (newest first), then
    ready ones: on draining nodes, then those that leave their GPU(s) empty, emptiest nodes
    first (so GPUs and nodes free up)."""
    if replica.node is None:
        return (0, 0.0, 0.0)
    if replica.ready_s is not None and replica.ready_s > now_s:
        return (1, -replica.ready_s, 0.0)
    if replica.node.draining:
        return (2, 0.0, 0.0)
    shared = sum(1.0 - replica.node.free[i] - replica.held for i in replica.gpus) > EPS
    return (3 + int(shared), replica.node.used(), -(replica.ready_s or 0.0))
