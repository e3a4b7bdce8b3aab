"""MIG relayouts against the API test server, with a fake MIG manager and ReplicaSet controller:
surge, cordon, evict through the Eviction API only, relabel, wait for success, uncordon; roll
back on failure or timeout; wait (never force) when a disruption budget says no."""

from __future__ import annotations

from typing import Protocol

import yaml
from apiserver import ApiServer
from fake_controllers import FakeMigManager, FakeReplicaController
from gpu_operator_configs import mig_parted_problems
from k8s_builders import GPU_OPERATOR_NS, HEADROOM_NS, MODELS_NS, gpu_node, gpu_pod, k8s_settings
from relayout_scenario import FROM, SLICE, TARGET, TO, relayout_actuator, seed

from controlplane.adapters.k8s.mig import K8sMigRelayoutActuator
from controlplane.domain.mig_layout import uniform
from controlplane.domain.mig_relayout import MigRelayout, RelayoutPhase
from controlplane.settings import pool_specs
from controlplane.sim.clock import VirtualClock
from controlplane.store.relayout import MemoryRelayoutStore


class Controller(Protocol):
    def react(self) -> None: ...


def run(actuator: K8sMigRelayoutActuator, clock: VirtualClock, *controllers: Controller,
        ticks: int = 20) -> list[MigRelayout]:
    """Reconcile ticks 30 s apart: advance relayouts, then let the controllers act."""
    seen: list[MigRelayout] = []
    for _ in range(ticks):
        clock.advance(30)
        seen.extend(actuator.advance())
        for controller in controllers:
            controller.react()
        if not actuator.store.active_relayouts():
            break
    return seen


def node_labels(server: ApiServer, name: str) -> dict[str, str]:
    return dict(server.get("v1", "Node", name)["metadata"]["labels"])


def pod_names(server: ApiServer) -> set[str]:
    return {p["metadata"]["name"] for p in server.list("v1", "Pod")}


def test_relayout_drains_through_evictions_relabels_and_uncordons(apiserver: ApiServer,
                                                                  clock: VirtualClock) -> None:
    seed(apiserver)
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    mig_manager = FakeMigManager(apiserver, clock=clock)
    replicas = FakeReplicaController(apiserver, "m", replicas=3)
    started = actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
    assert started.ok, started.message
    seen = run(actuator, clock, mig_manager, replicas)
    final = store.relayouts_of("a100-1")[-1]
    assert final.phase is RelayoutPhase.DONE and final.alert == ""
    labels = node_labels(apiserver, "a100-1")
    assert (labels["nvidia.com/mig.config"], labels["nvidia.com/mig.config.state"]) == (
        TO, "success")
    assert not apiserver.get("v1", "Node", "a100-1")["spec"].get("unschedulable")
    assert {"m-0", "m-1"}.isdisjoint(pod_names(apiserver))
    assert "nvidia-device-plugin-a100-1" in pod_names(apiserver)  # DaemonSet pods stay
    assert mig_manager.violations == [] and mig_manager.applied == [("a100-1", f"{TO}:success")]
    assert any(r.wait_reason.startswith("eviction_blocked_by_pdb") for r in seen)
    assert [r.method for r in apiserver.writes() if "/pods/" in r.path] == ["POST"] * len(
        [r for r in apiserver.writes() if r.path.endswith("/eviction")])
    config = yaml.safe_load(apiserver.get("v1", "ConfigMap", "headroom-mig-parted-config",
                                          GPU_OPERATOR_NS)["data"]["config.yaml"])
    assert config["mig-configs"][TO] == [{  # scoped to the A100-80GB's GPUs
        "device-filter": ["0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"],
        "devices": "all", "mig-enabled": True, "mig-devices": {
            "3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]
    assert FROM in config["mig-configs"]  # the rollback target stays resolvable
    assert mig_parted_problems(yaml.safe_dump(config), "A100-80GB") == []


def test_a_new_config_selects_the_node_only_once_the_mig_managers_mounted_file_holds_it(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    mig_manager = FakeMigManager(apiserver, clock=clock, mounted_delay_s=90.0)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    seen = run(actuator, clock, mig_manager, FakeReplicaController(apiserver, "m", 3))
    final = store.relayouts_of("a100-1")[-1]
    assert final.phase is RelayoutPhase.DONE, (final.phase, final.alert)
    assert mig_manager.applied == [("a100-1", f"{TO}:success")]  # never failed for want of it
    waits = [r.wait_reason for r in seen if r.wait_reason.startswith("config_propagating")]
    assert waits and waits[0].startswith(f"config_propagating: {TO} written at 09:00:30, "
                                         "labelled after 09:02:30")
    stored = apiserver.get("v1", "ConfigMap", "headroom-mig-parted-config", GPU_OPERATOR_NS)
    written = yaml.safe_load(stored["metadata"]["annotations"]["headroom.dev/written-at"])
    assert written[TO] == "2026-03-02T09:00:30Z"  # at the cordon, before the drain


def test_a_relayout_to_the_config_a_node_failed_is_refused_before_any_cordon_or_drain(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    apiserver.seed(gpu_node("a100-3", gpus=1, mig_config=TO, mig_state="failed"))
    apiserver.seed(gpu_node("a100-4", gpus=1, mig_config=TO, mig_state=""))
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    writes = len(apiserver.writes())
    refused = actuator.start_relayout("a100-3", TARGET, "placement_wants_3g")
    assert not refused.ok and not refused.retryable
    assert refused.message == (
        f"mig_config_not_applied: node a100-3 is labelled nvidia.com/mig.config={TO} with "
        "nvidia.com/mig.config.state=failed; relabelling to the same config does not re-run the "
        "MIG manager: fix the node by hand or lay it out to another config")
    unset = actuator.start_relayout("a100-4", TARGET, "placement_wants_3g")
    assert not unset.ok and "nvidia.com/mig.config.state=unset;" in unset.message
    assert store.active_relayouts() == () and len(apiserver.writes()) == writes
    assert not apiserver.get("v1", "Node", "a100-3")["spec"].get("unschedulable")
    other = actuator.start_relayout("a100-3", uniform("A100-80GB", ("7g.80gb",)), "other")
    assert other.ok, other.message  # another layout re-runs the MIG manager


def test_a_budget_that_forbids_eviction_makes_the_relayout_wait_and_never_forces(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver, budget={"min_available": 3})
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    run(actuator, clock, FakeMigManager(apiserver, clock=clock), ticks=8)
    waiting = store.relayouts_of("a100-1")[-1]
    assert waiting.phase is RelayoutPhase.DRAIN
    assert waiting.wait_reason == "eviction_blocked_by_pdb: models/m-0, models/m-1"
    assert {"m-0", "m-1", "m-2"} <= pod_names(apiserver)
    evictions = [r for r in apiserver.writes() if r.path.endswith("/eviction")]
    assert len(evictions) == 7 * 2 and {r.status for r in evictions} == {429}  # tick 1 cordons
    assert not [r for r in apiserver.writes() if r.method == "DELETE"]
    assert node_labels(apiserver, "a100-1")["nvidia.com/mig.config"] == FROM
    apiserver.delete("policy/v1", "PodDisruptionBudget", "m", MODELS_NS)
    run(actuator, clock, FakeMigManager(apiserver, clock=clock))
    assert store.relayouts_of("a100-1")[-1].phase is RelayoutPhase.DONE


def test_surge_capacity_comes_first_and_holds_the_pool_size(apiserver: ApiServer,
                                                            clock: VirtualClock) -> None:
    seed(apiserver, spare_slots=1)  # a100-2's one slot is taken by m-2
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    run(actuator, clock, ticks=2)
    waiting = store.relayouts_of("a100-1")[-1]
    assert waiting.phase is RelayoutPhase.SURGE and waiting.surge_nodes == 3
    assert waiting.wait_reason == f"surge_pending: short {SLICE}=2"
    assert not apiserver.get("v1", "Node", "a100-1")["spec"].get("unschedulable")
    placeholder = apiserver.get("apps/v1", "Deployment", "headroom-warm-a100-80gb", HEADROOM_NS)
    assert placeholder["spec"]["replicas"] == 3
    held = actuator.node_pools.set_size("a100-80gb", 1)  # the planner wants to shrink
    assert held.ok and "surge floor 3" in held.message
    apiserver.seed(gpu_node("a100-3", gpus=1, mig_config=FROM, allocatable={SLICE: "7"}))
    run(actuator, clock, FakeMigManager(apiserver, clock=clock),
        FakeReplicaController(apiserver, "m", 3))
    assert store.relayouts_of("a100-1")[-1].phase is RelayoutPhase.DONE
    assert "surge floor" not in actuator.node_pools.set_size("a100-80gb", 1).message


def test_a_failed_mig_config_rolls_back_uncordons_and_alerts(apiserver: ApiServer,
                                                             clock: VirtualClock) -> None:
    seed(apiserver)
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    run(actuator, clock, FakeMigManager(apiserver, {TO: "failed"}, clock=clock),
        FakeReplicaController(apiserver, "m", 3))
    final = store.relayouts_of("a100-1")[-1]
    assert final.phase is RelayoutPhase.ROLLED_BACK and final.alert == "mig_config_failed"
    labels = node_labels(apiserver, "a100-1")
    assert (labels["nvidia.com/mig.config"], labels["nvidia.com/mig.config.state"]) == (
        FROM, "success")
    assert not apiserver.get("v1", "Node", "a100-1")["spec"].get("unschedulable")


def test_a_mig_manager_that_never_finishes_times_out_into_a_rollback(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    run(actuator, clock, FakeMigManager(apiserver, {TO: "pending"}, clock=clock),
        FakeReplicaController(apiserver, "m", 3))
    final = store.relayouts_of("a100-1")[-1]
    assert final.phase is RelayoutPhase.ROLLED_BACK and final.alert == "mig_config_timeout"


def test_starting_refuses_invalid_busy_and_mps_nodes_and_skips_applied_layouts(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    apiserver.seed(gpu_node("a100-3", gpus=1, mig_config=TO))
    apiserver.seed(gpu_node("a100-4", gpus=1, sharing="mps", nodepool="a100-80gb"))
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    invalid = actuator.start_relayout("a100-1", uniform("A100-80GB", ("4g.40gb", "4g.40gb")), "x")
    assert not invalid.ok and not invalid.retryable and "not a valid MIG geometry" in (
        invalid.message)
    assert actuator.start_relayout("a100-3", TARGET, "x").message == f"node a100-3 already at {TO}"
    mps = actuator.start_relayout("a100-4", TARGET, "x")
    assert not mps.ok and "MPS" in mps.message
    assert actuator.start_relayout("a100-1", TARGET, "x").ok
    assert "in progress" in actuator.start_relayout("a100-1", TARGET, "x").message
    busy = actuator.start_relayout("a100-2", TARGET, "x")
    assert not busy.ok and busy.retryable and busy.message.startswith("pool_relayout_in_progress")
    assert len(store.active_relayouts()) == 1
    unknown = actuator.start_relayout("ghost", TARGET, "x")
    assert not unknown.ok and "unknown node ghost" in unknown.message


def test_a_node_whose_mig_change_is_still_running_is_not_started(apiserver: ApiServer,
                                                                 clock: VirtualClock) -> None:
    seed(apiserver)
    apiserver.seed(gpu_node("a100-5", gpus=1, mig_config="all-balanced", mig_state="pending"))
    outcome = relayout_actuator(apiserver, clock, MemoryRelayoutStore()).start_relayout(
        "a100-5", TARGET, "x")
    assert not outcome.ok and outcome.retryable
    assert outcome.message == "mig_change_in_progress: all-balanced is pending"


def test_a_drain_a_budget_blocks_past_its_timeout_uncordons_and_is_not_retried_at_once(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver, budget={"min_available": 3})
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store, drain_timeout_s=300.0,
                                 relayout_retry_after_s=1800.0)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    run(actuator, clock, FakeMigManager(apiserver, clock=clock))
    aborted = store.relayouts_of("a100-1")[-1]
    assert aborted.phase is RelayoutPhase.ABORTED
    assert aborted.alert == "drain_timeout: models/m-0, models/m-1 still running"
    assert not apiserver.get("v1", "Node", "a100-1")["spec"].get("unschedulable")
    clock.advance(30)  # the next tick plans the same layout again
    again = actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
    assert not again.ok and again.retryable
    assert again.message.startswith(f"relayout_backoff: the last relayout of a100-1 to {TO} "
                                    "ended aborted (drain_timeout: models/m-0, models/m-1 still "
                                    "running)")
    assert store.active_relayouts() == ()
    assert not apiserver.get("v1", "Node", "a100-1")["spec"].get("unschedulable")
    other = actuator.start_relayout("a100-1", uniform("A100-80GB", ("7g.80gb",)), "other")
    assert other.ok, other.message  # another layout is not held back
    assert store.active_relayouts()[0].to_config != TO


def test_a_layout_the_mig_manager_failed_is_retried_only_after_the_backoff(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store, relayout_retry_after_s=1800.0)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    run(actuator, clock, FakeMigManager(apiserver, {TO: "failed"}, clock=clock),
        FakeReplicaController(apiserver, "m", 3))
    rolled_back = store.relayouts_of("a100-1")[-1]
    assert rolled_back.phase is RelayoutPhase.ROLLED_BACK
    evictions = len([r for r in apiserver.writes() if r.path.endswith("/eviction")])
    clock.advance(30)
    refused = actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
    assert not refused.ok and refused.retryable and "(mig_config_failed)" in refused.message
    run(actuator, clock, ticks=3)
    assert len([r for r in apiserver.writes() if r.path.endswith("/eviction")]) == evictions
    clock.advance(1800)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    assert store.active_relayouts()[0].to_config == TO


def test_a_relayout_of_a_pool_no_longer_configured_fails_naming_it_and_frees_its_slot(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    store = MemoryRelayoutStore()
    started = relayout_actuator(apiserver, clock, store).start_relayout("a100-1", TARGET, "x")
    assert started.ok, started.message
    # the operator removes the a100 pool from Headroom's settings and restarts it
    without_a100 = tuple(p for p in pool_specs(k8s_settings()) if p.name != "a100-80gb")
    restarted = relayout_actuator(apiserver, clock, store, pools=without_a100)
    assert restarted.in_flight() == {"a100-1": TARGET}
    clock.advance(30)
    (failed,) = restarted.advance()
    assert failed.phase is RelayoutPhase.FAILED
    assert failed.alert.startswith("pool_unconfigured: pool a100-80gb is no longer")
    assert restarted.in_flight() == {} and store.active_relayouts() == ()


BARE_WHY = ("unmanaged_pods: research/notebook (no controller would recreate it; delete or move "
            "it, then the drain goes on)")


def bare_pod() -> dict[str, object]:
    """A GPU pod nothing owns: evicting it would delete it for good."""
    return gpu_pod("notebook", "a100-1", namespace="research")


def evicted(server: ApiServer) -> list[str]:
    return [r.path.split("/pods/")[1].removesuffix("/eviction") for r in server.writes()
            if r.path.endswith("/eviction")]


def test_a_relayout_of_a_node_running_a_bare_gpu_pod_is_refused_before_any_surge_or_cordon(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    apiserver.seed(bare_pod())
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    writes = len(apiserver.writes())
    refused = actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
    assert not refused.ok and refused.retryable
    assert refused.message == f"node a100-1: {BARE_WHY}"
    assert store.active_relayouts() == () and len(apiserver.writes()) == writes
    assert not apiserver.get("v1", "Node", "a100-1")["spec"].get("unschedulable")
    apiserver.delete("v1", "Pod", "notebook", "research")
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok


def test_a_relayout_of_a_node_running_a_pod_that_asks_not_to_be_disrupted_is_refused(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    kept = gpu_pod("trainer-0", "a100-1", namespace="research", owner_kind="StatefulSet")
    kept["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    apiserver.seed(kept)
    actuator = relayout_actuator(apiserver, clock, MemoryRelayoutStore())
    writes = len(apiserver.writes())
    refused = actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
    assert not refused.ok and refused.retryable
    assert refused.message == (
        "node a100-1: do_not_disrupt: research/trainer-0 (karpenter.sh/do-not-disrupt=true; "
        "remove the annotation or move it, then the drain goes on)")
    assert len(apiserver.writes()) == writes and evicted(apiserver) == []


def test_a_bare_gpu_pod_bound_after_the_start_is_never_evicted_and_holds_the_drain_naming_it(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    apiserver.seed(bare_pod())  # bound by nodeName: a cordon does not keep it off
    mig_manager = FakeMigManager(apiserver, clock=clock)
    replicas = FakeReplicaController(apiserver, "m", replicas=3)
    run(actuator, clock, mig_manager, replicas, ticks=6)
    waiting = store.relayouts_of("a100-1")[-1]
    assert (waiting.phase, waiting.wait_reason) == (RelayoutPhase.DRAIN, BARE_WHY)
    assert evicted(apiserver) == []  # the Deployment's pods stay until the drain can finish
    assert {"notebook", "m-0", "m-1"} <= pod_names(apiserver)
    apiserver.delete("v1", "Pod", "notebook", "research")  # its owner moves it
    run(actuator, clock, mig_manager, replicas)
    final = store.relayouts_of("a100-1")[-1]
    assert final.phase is RelayoutPhase.DONE, (final.phase, final.alert)
    assert {"m-0", "m-1"} <= set(evicted(apiserver))  # the Deployment's, as before
    assert not any(name.startswith("notebook") for name in evicted(apiserver))


def test_a_drain_a_bare_gpu_pod_holds_past_its_timeout_aborts_uncordoned_and_keeps_the_pod(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed(apiserver)
    store = MemoryRelayoutStore()
    actuator = relayout_actuator(apiserver, clock, store, drain_timeout_s=300.0)
    assert actuator.start_relayout("a100-1", TARGET, "placement_wants_3g").ok
    apiserver.seed(bare_pod())
    run(actuator, clock, FakeMigManager(apiserver, clock=clock))
    aborted = store.relayouts_of("a100-1")[-1]
    assert aborted.phase is RelayoutPhase.ABORTED
    assert aborted.alert == ("drain_timeout: models/m-0, models/m-1, research/notebook still "
                             f"running; {BARE_WHY}")
    assert not apiserver.get("v1", "Node", "a100-1")["spec"].get("unschedulable")
    assert "notebook" in pod_names(apiserver) and evicted(apiserver) == []
    assert node_labels(apiserver, "a100-1")["nvidia.com/mig.config"] == FROM
