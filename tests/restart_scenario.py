"""The restart scenario both restart proofs share (the simulated fleet's in tests/controlplane,
the Kubernetes API test server's in tests/k8s): a model PlanFleet may serve on 2g slices or a
whole 7g, its load, and how many re-layouts a run of ticks asked for."""

from __future__ import annotations

from controlplane.domain.actions import RelayoutMig
from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.domain.node_plan import RELAYOUT_SETTLING
from controlplane.domain.tick import TickReport

A100 = "A100-80GB"
RATE_RPS = 200.0
# a model PlanFleet may serve on 2g slices (200 rps each) or on a whole 7g (770 rps): the loop
# asks 325 rps for the 200 it sees (no forecast yet), one GPU either way; from scratch PlanFleet
# designs the 7g
CHAT = ModelSpec("chat", "acme", Isolation.TRUSTED, Engine.VLLM, 400.0, (
    ProfilePoint(A100, 2, 8, 1, 200.0, 100.0, 18_000),
    ProfilePoint(A100, 7, 32, 1, 770.0, 150.0, 70_000)), ColdStart(20.0, 30.0))


def relayouts_asked(reports: list[TickReport]) -> int:
    """Re-layouts the ticks started, plus those they held back only to let the plan settle."""
    started = sum(isinstance(a, RelayoutMig) for r in reports if r.plan for a in r.plan.actions)
    held = sum(s.reason == RELAYOUT_SETTLING for r in reports if r.plan for s in r.plan.skipped)
    return started + held
