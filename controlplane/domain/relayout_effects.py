"""The effects a MIG re-layout's step asks for (``mig_relayout.step_relayout``), as values: the
executor (the Kubernetes adapter) runs them, each idempotent, before it saves the step."""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.domain.mig_layout import NodeMigLayout


@dataclass(frozen=True, slots=True)
class ScalePool:
    pool: str
    nodes: int


@dataclass(frozen=True, slots=True)
class SetUnschedulable:
    """Cordon the node with the relayout's marker, or uncordon it and remove the marker."""

    node: str
    unschedulable: bool


@dataclass(frozen=True, slots=True)
class Evict:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class WriteMigConfig:
    name: str
    layout: NodeMigLayout


@dataclass(frozen=True, slots=True)
class LabelMigConfig:
    """Set ``nvidia.com/mig.config`` and clear ``nvidia.com/mig.config.state`` so that only the
    MIG manager's next report counts."""

    node: str
    config: str


Effect = ScalePool | SetUnschedulable | Evict | WriteMigConfig | LabelMigConfig
