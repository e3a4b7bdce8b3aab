"""The acceptance plan: scale two models up, add a node through warm capacity, re-lay out an
A100-80GB from 7 x 1g.10gb to 3g.40gb + 2g.20gb + 2 x 1g.10gb, switch an L4 node to MPS."""

from __future__ import annotations

from apiserver import ApiServer
from fake_controllers import FakeMigManager, FakeReplicaController
from k8s_builders import gpu_node, model_deployment, nodepool
from relayout_scenario import FROM, TARGET, seed

from controlplane.actuation import apply_actions
from controlplane.adapters.k8s.backend import K8sBackend
from controlplane.domain.actions import (
    Action,
    ActionOutcome,
    ApplySharing,
    RelayoutMig,
    ScaleNodePool,
    SetReplicas,
)
from controlplane.domain.mig_layout import builtin_layout
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.sim.clock import VirtualClock


def seed_fleet(server: ApiServer) -> None:
    seed(server)  # a100-1 and a100-2 at 7 x 1g.10gb, model m, its budget, NodePool a100-80gb
    server.seed(nodepool("l4", gpu_name="l4"))
    server.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    server.seed(model_deployment("language/m-large", replicas=1))
    server.seed(model_deployment("vision/resnet", replicas=2, kind="StatefulSet", engine="vllm"))


def full_plan() -> list[Action]:
    from_layout = builtin_layout("A100-80GB", FROM)
    assert from_layout is not None
    return [
        ScaleNodePool("a100-80gb", 2, 3, "forecast_p90_above_capacity"),
        SetReplicas("language/m-large", 1, 3, "forecast_p90_above_capacity"),
        SetReplicas("vision/resnet", 2, 4, "forecast_p90_above_capacity"),
        RelayoutMig("a100-1", from_layout, TARGET, "placement_wants_3g_slice"),
        ApplySharing("l4-1", SharingLayout(SharingMode.EXCLUSIVE),
                     SharingLayout(SharingMode.MPS, 4), "small_trusted_models"),
    ]


def run_full_plan(server: ApiServer, clock: VirtualClock, backend: K8sBackend,
                  mig: FakeMigManager) -> tuple[ActionOutcome, ...]:
    """Apply the plan as the leader, then tick (30 s apart) until the relayout settles, then
    apply again the actions that were not done yet but may be retried (a sharing config that
    was still propagating), as the next tick's plan would; the outcomes are the last ones."""
    assert backend.elector.try_acquire_or_renew(clock.now())
    plan = full_plan()
    outcomes = apply_actions(plan, backend.actuators)
    replicas = FakeReplicaController(server, "m", 3)
    for _ in range(20):
        clock.advance(30)
        assert backend.elector.try_acquire_or_renew(clock.now())
        backend.mig.advance()
        mig.react()
        replicas.react()
        if not backend.relayouts.active_relayouts():
            break
    retried = [a for a, o in zip(plan, outcomes, strict=True) if not o.ok and o.retryable]
    again = iter(apply_actions(retried, backend.actuators))
    outcomes = tuple(next(again) if not o.ok and o.retryable else o for o in outcomes)
    backend.reader.snapshot()
    return outcomes
