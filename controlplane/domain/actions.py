"""Actions: absolute targets with reasons (pure values). Every action is idempotent to apply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from controlplane.domain.mig_layout import NodeMigLayout, config_name
from controlplane.domain.sharing_config import SharingLayout


@dataclass(frozen=True, slots=True)
class ScaleNodePool:
    pool: str
    from_nodes: int
    to_nodes: int
    reason: str
    kind: Literal["scale_node_pool"] = "scale_node_pool"

    @property
    def target(self) -> str:
        return self.pool

    @property
    def from_value(self) -> int:
        return self.from_nodes

    @property
    def to_value(self) -> int:
        return self.to_nodes

    def render(self) -> str:
        return f"pool {self.pool} {self.from_nodes}→{self.to_nodes} ({self.reason})"

    def to_log(self) -> dict[str, object]:
        return {"kind": self.kind, "pool": self.pool, "from": self.from_nodes,
                "to": self.to_nodes, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class SetReplicas:
    model: str
    from_replicas: int
    to_replicas: int
    reason: str
    kind: Literal["set_replicas"] = "set_replicas"

    @property
    def target(self) -> str:
        return self.model

    @property
    def from_value(self) -> int:
        return self.from_replicas

    @property
    def to_value(self) -> int:
        return self.to_replicas

    def render(self) -> str:
        change = f"{self.from_replicas}→{self.to_replicas}"
        return f"model {self.model} replicas {change} ({self.reason})"

    def to_log(self) -> dict[str, object]:
        return {"kind": self.kind, "model": self.model, "from": self.from_replicas,
                "to": self.to_replicas, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ApplySharing:
    """Share a node's GPUs through the device plugin (MPS / time-slicing) or make them exclusive.
    ``from_value``/``to_value`` are clients per GPU."""

    node: str
    from_layout: SharingLayout
    to_layout: SharingLayout
    reason: str
    kind: Literal["apply_sharing"] = "apply_sharing"

    @property
    def target(self) -> str:
        return self.node

    @property
    def from_value(self) -> int:
        return self.from_layout.replicas

    @property
    def to_value(self) -> int:
        return self.to_layout.replicas

    def render(self) -> str:
        return (f"node {self.node} sharing {self.from_layout.describe()}→"
                f"{self.to_layout.describe()} ({self.reason})")

    def to_log(self) -> dict[str, object]:
        return {"kind": self.kind, "node": self.node, "from": self.from_layout.describe(),
                "to": self.to_layout.describe(), "reason": self.reason}


@dataclass(frozen=True, slots=True)
class RelayoutMig:
    """Re-lay out a node's MIG instances (a drain: surge, cordon, evict, relabel, uncordon).
    ``from_value``/``to_value`` count MIG instances per GPU, summed over device groups."""

    node: str
    from_layout: NodeMigLayout
    to_layout: NodeMigLayout
    reason: str
    kind: Literal["relayout_mig"] = "relayout_mig"

    @property
    def target(self) -> str:
        return self.node

    @property
    def from_value(self) -> int:
        return self.from_layout.instance_count()

    @property
    def to_value(self) -> int:
        return self.to_layout.instance_count()

    def render(self) -> str:
        return (f"node {self.node} MIG {self.from_layout.describe()}→"
                f"{self.to_layout.describe()} ({self.reason})")

    def to_log(self) -> dict[str, object]:
        return {"kind": self.kind, "node": self.node, "from": config_name(self.from_layout),
                "to": config_name(self.to_layout), "reason": self.reason}


NodeAction = ApplySharing | RelayoutMig
Action = ScaleNodePool | SetReplicas | NodeAction


@dataclass(frozen=True, slots=True)
class SkippedAction:
    """A change the desired state asked for that a guard held back, with the guard's reason."""

    target: str
    wanted: int
    kept: int
    reason: str

    def render(self) -> str:
        return f"skip {self.target} wanted {self.wanted}, kept {self.kept} ({self.reason})"


#: how a Deployment's scale-down chose the replicas that go: ``steered`` (pod-deletion-costs
#: written so those on the emptiest nodes go first), ``ranked`` (the costs already ranked them
#: so), ``unsteered`` (the pods could not be read or annotated: the ReplicaSet chooses)
STEERING = ("steered", "ranked", "unsteered")


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What applying an action actually did (CA's actuation status)."""

    target: str
    ok: bool
    message: str
    retryable: bool = False
    #: a Deployment's scale-down: how its pods were ranked for removal (``STEERING``), "" for
    #: any other action
    steering: str = ""
