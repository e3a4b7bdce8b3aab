"""A MIG relayout leaves an operator's cordon alone (API test server): a node someone else
cordoned is not re-laid out, one cordoned by someone else before the relayout cordons it stays
cordoned after, and a cordon stripped of the relayout's marker label stays; the relayout's own
cordon (marked) is undone with its marker."""

from __future__ import annotations

import logging

import pytest
from apiserver import ApiServer
from fake_controllers import FakeMigManager, FakeReplicaController
from k8s_builders import gpu_node
from relayout_scenario import FROM, SLICE, TARGET, relayout_actuator, seed

from controlplane.adapters.k8s.mig import K8sMigRelayoutActuator
from controlplane.adapters.k8s.names import RELAYOUT_CORDON_LABEL, label_value
from controlplane.domain.mig_relayout import MigRelayout, RelayoutPhase
from controlplane.sim.clock import VirtualClock
from controlplane.store.relayout import MemoryRelayoutStore


def run_until(actuator: K8sMigRelayoutActuator, clock: VirtualClock, apiserver: ApiServer,
              phase: RelayoutPhase | None = None, ticks: int = 20) -> MigRelayout:
    """Reconcile ticks 30 s apart (MIG manager and ReplicaSet controller acting after each)
    until the relayout of a100-1 reaches ``phase`` (None: ends)."""
    controllers = (FakeMigManager(apiserver, clock=clock), FakeReplicaController(apiserver, "m", 3))
    for _ in range(ticks):
        clock.advance(30)
        actuator.advance()
        relayout = actuator.store.relayouts_of("a100-1")[-1]
        if relayout.phase is phase or (phase is None and not relayout.is_active):
            return relayout
        for controller in controllers:
            controller.react()
    raise AssertionError(f"relayout of a100-1 never reached {phase}: {relayout}")


def started(apiserver: ApiServer, clock: VirtualClock,
            spare_slots: int = 7) -> K8sMigRelayoutActuator:
    """The relayout scenario seeded and a relayout of a100-1 to TARGET started."""
    seed(apiserver, spare_slots=spare_slots)
    actuator = relayout_actuator(apiserver, clock, MemoryRelayoutStore())
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    return actuator


def node(apiserver: ApiServer) -> tuple[bool, str | None]:
    """a100-1's cordon and the relayout marker label it carries."""
    obj = apiserver.get("v1", "Node", "a100-1")
    return (bool(obj["spec"].get("unschedulable")),
            obj["metadata"].get("labels", {}).get(RELAYOUT_CORDON_LABEL))


def test_a_node_an_operator_cordoned_is_not_re_laid_out(apiserver: ApiServer,
                                                        clock: VirtualClock) -> None:
    seed(apiserver)
    apiserver.update("v1", "Node", "a100-1", {"spec": {"unschedulable": True}}, manager="kubectl")
    store = MemoryRelayoutStore()
    outcome = relayout_actuator(apiserver, clock, store).start_relayout("a100-1", TARGET, "x")
    assert not outcome.ok and outcome.retryable
    assert outcome.message == (
        "node_cordoned: node a100-1 is cordoned (an operator's cordon means leave it alone); "
        "not re-laid out")
    assert store.relayouts_of("a100-1") == ()
    assert node(apiserver) == (True, None)


def test_a_node_cordoned_by_someone_else_during_the_surge_stays_cordoned_after_the_relayout(
        apiserver: ApiServer, clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    actuator = started(apiserver, clock, spare_slots=1)  # the relayout waits for a surge node
    assert run_until(actuator, clock, apiserver, RelayoutPhase.SURGE).surge_nodes == 3
    apiserver.update("v1", "Node", "a100-1", {"spec": {"unschedulable": True}}, manager="kubectl")
    apiserver.seed(gpu_node("a100-3", gpus=1, mig_config=FROM, allocatable={SLICE: "7"}))
    with caplog.at_level(logging.INFO, "headroom.k8s.mig"):
        final = run_until(actuator, clock, apiserver)
    assert final.phase is RelayoutPhase.DONE and final.was_cordoned
    assert final.wait_reason == ("left_cordoned: a100-1 was cordoned before the relayout; its "
                                 "cordon is not Headroom's")
    assert node(apiserver) == (True, None)
    assert [r.node for r in caplog.records  # type: ignore[attr-defined]
            if r.getMessage() == "relayout.left_cordoned"] == ["a100-1"]


def test_a_cordon_whose_marker_an_operator_removed_mid_drain_stays_after_the_relayout(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    actuator = started(apiserver, clock)
    draining = run_until(actuator, clock, apiserver, RelayoutPhase.DRAIN)
    assert node(apiserver) == (True, label_value(draining.relayout_id))
    apiserver.update("v1", "Node", "a100-1", {"metadata": {"labels": {
        RELAYOUT_CORDON_LABEL: None}}}, manager="kubectl")  # the operator keeps the cordon
    final = run_until(actuator, clock, apiserver)
    assert final.phase is RelayoutPhase.DONE and not final.was_cordoned
    assert final.wait_reason == (
        "left_cordoned: a100-1's cordon lacks this relayout's marker (someone else's)")
    assert node(apiserver) == (True, None)


def test_a_relayout_undoes_its_own_marked_cordon(apiserver: ApiServer,
                                                 clock: VirtualClock) -> None:
    actuator = started(apiserver, clock)
    draining = run_until(actuator, clock, apiserver, RelayoutPhase.DRAIN)
    assert node(apiserver) == (True, label_value(draining.relayout_id))
    final = run_until(actuator, clock, apiserver)
    assert final.phase is RelayoutPhase.DONE and final.wait_reason == ""
    assert not final.was_cordoned
    assert node(apiserver) == (False, None)
