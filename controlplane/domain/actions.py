"""Actions: absolute targets with reasons (pure values). Every action is idempotent to apply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
        return f"model {self.model} replicas {self.from_replicas}→{self.to_replicas} ({self.reason})"

    def to_log(self) -> dict[str, object]:
        return {"kind": self.kind, "model": self.model, "from": self.from_replicas,
                "to": self.to_replicas, "reason": self.reason}


Action = ScaleNodePool | SetReplicas


@dataclass(frozen=True, slots=True)
class SkippedAction:
    """A change the desired state asked for that a guard held back, with the guard's reason."""

    target: str
    wanted: int
    kept: int
    reason: str

    def render(self) -> str:
        return f"skip {self.target} wanted {self.wanted}, kept {self.kept} ({self.reason})"


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What applying an action actually did (CA's actuation status)."""

    target: str
    ok: bool
    message: str
    retryable: bool = False
