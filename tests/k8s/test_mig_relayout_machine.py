"""The MIG relayout state machine, decided purely from observed views."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controlplane.domain.mig_layout import uniform
from controlplane.domain.mig_relayout import (
    MigRelayout,
    RelayoutPhase,
    RelayoutPolicy,
    RelayoutView,
    same_config_refusal,
    start_relayout,
    step_relayout,
    with_blocked_evictions,
)
from controlplane.domain.relayout_drain import (
    NodeCapacity,
    PodOnNode,
    capacity_shortfall,
    gpu_equivalent,
    held_pods_refusal,
)
from controlplane.domain.relayout_effects import (
    Evict,
    LabelMigConfig,
    ScalePool,
    SetUnschedulable,
    WriteMigConfig,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
POLICY = RelayoutPolicy(surge_timeout_s=600, drain_timeout_s=1200, mig_timeout_s=300)
LAYOUT = uniform("A100-80GB", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
TO = "headroom-1x3g.40gb-1x2g.20gb-2x1g.10gb"
SLICE = "nvidia.com/mig-1g.10gb"
POD = PodOnNode("models", "m-0", ((SLICE, 1),), managed=True)



def shortfall(v: RelayoutView) -> dict[str, int]:
    return capacity_shortfall(v.pods, v.others)

def view(*, cordoned: bool = False, config: str = "all-1g.10gb", state: str = "success",
         pods: tuple[PodOnNode, ...] = (POD,), spare: int = 3, target: int = 2,
         exists: bool = True, mine: bool | None = None, present: bool = True,
         written: datetime | None = None) -> RelayoutView:
    """``mine``: the cordon carries this relayout's marker (by default: whenever cordoned);
    ``present``/``written``: the MIG ConfigMap holds the target config, written then (by
    default: present, with no recorded time, as long present)."""
    other = NodeCapacity("a100-2", True, ((SLICE, spare),))
    return RelayoutView(exists, cordoned, config, state, pods, (other,), target, 8,
                        cordoned if mine is None else mine, present, written)


def fresh() -> MigRelayout:
    return start_relayout("a100-1", "a100-80gb", "all-1g.10gb", TO, LAYOUT, T0, POLICY, "plan")


def draining_until(deadline_at: datetime) -> MigRelayout:
    """A fresh relayout in its drain, which times out at ``deadline_at``."""
    return replace(fresh(), phase=RelayoutPhase.DRAIN, deadline_at=deadline_at)


def test_happy_path_writes_the_config_at_the_cordon_and_labels_once_it_has_propagated(
) -> None:
    r = fresh()
    assert r.phase is RelayoutPhase.SURGE and r.deadline_at == T0 + timedelta(seconds=600)
    step = step_relayout(r, view(present=False), T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.CORDON and step.effects == ()
    step = step_relayout(step.relayout, view(present=False), T0, POLICY)
    assert step.effects == (WriteMigConfig(TO, LAYOUT), SetUnschedulable("a100-1", True))
    assert step.relayout.phase is RelayoutPhase.CORDON  # until the node shows it
    step = step_relayout(step.relayout, view(cordoned=True, written=T0), T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.DRAIN and step.effects == ()
    step = step_relayout(step.relayout, view(cordoned=True, written=T0), T0, POLICY)
    assert step.effects == (Evict("models", "m-0"),)
    drained = view(cordoned=True, pods=(), written=T0)
    step = step_relayout(step.relayout, drained, T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.RELABEL
    early = step_relayout(step.relayout, drained, T0 + timedelta(seconds=119), POLICY)
    assert early.effects == () and early.relayout.phase is RelayoutPhase.RELABEL
    assert early.relayout.wait_reason == (
        f"config_propagating: {TO} written at 09:00:00, labelled after 09:02:00")
    step = step_relayout(early.relayout, drained, T0 + timedelta(seconds=120), POLICY)
    assert step.effects == (LabelMigConfig("a100-1", TO),)
    assert step.relayout.phase is RelayoutPhase.AWAIT_MIG
    waiting = step_relayout(step.relayout, view(cordoned=True, pods=(), config=TO, state=""),
                            T0, POLICY)
    assert waiting.relayout.wait_reason == "awaiting_mig_manager: state=unset"
    done = step_relayout(waiting.relayout, view(cordoned=True, pods=(), config=TO), T0, POLICY)
    assert done.relayout.phase is RelayoutPhase.DONE
    assert done.effects == (SetUnschedulable("a100-1", False),)
    assert not done.relayout.is_active and done.relayout.alert == ""


def test_a_config_missing_at_relabel_is_written_again_and_labelled_only_once_propagated(
) -> None:
    relabel = replace(fresh(), phase=RelayoutPhase.RELABEL,
                      deadline_at=T0 + timedelta(seconds=420))
    gone = step_relayout(relabel, view(cordoned=True, pods=(), present=False), T0, POLICY)
    assert gone.effects == (WriteMigConfig(TO, LAYOUT),)  # no label for a missing config
    assert gone.relayout.phase is RelayoutPhase.RELABEL
    assert gone.relayout.wait_reason == (
        f"config_propagating: {TO} not yet in the ConfigMap as wanted")
    written = view(cordoned=True, pods=(), written=T0 + timedelta(seconds=30))
    waiting = step_relayout(gone.relayout, written, T0 + timedelta(seconds=60), POLICY)
    assert waiting.effects == () and waiting.relayout.phase is RelayoutPhase.RELABEL
    labelled = step_relayout(waiting.relayout, written, T0 + timedelta(seconds=150), POLICY)
    assert labelled.effects == (LabelMigConfig("a100-1", TO),)


def test_a_config_without_a_recorded_write_time_counts_as_long_present() -> None:
    relabel = replace(fresh(), phase=RelayoutPhase.RELABEL)
    step = step_relayout(relabel, view(cordoned=True, pods=(), written=None), T0, POLICY)
    assert step.effects == (LabelMigConfig("a100-1", TO),)


def test_a_zero_propagation_window_labels_a_config_written_the_same_moment() -> None:
    relabel = replace(fresh(), phase=RelayoutPhase.RELABEL)
    at_once = replace(POLICY, config_propagation_s=0.0)
    step = step_relayout(relabel, view(cordoned=True, pods=(), written=T0), T0, at_once)
    assert step.effects == (LabelMigConfig("a100-1", TO),)


def test_a_config_that_never_propagates_aborts_before_the_label_and_gives_back_the_node(
) -> None:
    relabel = replace(fresh(), phase=RelayoutPhase.RELABEL,
                      deadline_at=T0 + timedelta(seconds=420))
    late = step_relayout(relabel, view(cordoned=True, pods=(), present=False),
                         T0 + timedelta(seconds=420), POLICY)
    assert late.relayout.phase is RelayoutPhase.ABORTED
    assert late.effects == (SetUnschedulable("a100-1", False),)
    assert late.relayout.alert == (
        f"config_propagation_timeout: {TO} not yet in the ConfigMap as wanted")


def test_relabel_is_entered_with_a_deadline_of_the_propagation_window_and_the_mig_timeout(
) -> None:
    draining = replace(fresh(), phase=RelayoutPhase.DRAIN)
    step = step_relayout(draining, view(cordoned=True, pods=()), T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.RELABEL
    assert step.relayout.deadline_at == T0 + timedelta(seconds=120 + 300)


def test_missing_capacity_asks_for_surge_nodes_before_any_disruption() -> None:
    short = view(pods=(POD, replace(POD, name="m-1")), spare=1, target=2)
    assert capacity_shortfall(short.pods, short.others) == {SLICE: 1}
    step = step_relayout(fresh(), short, T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.SURGE
    assert step.effects == (ScalePool("a100-80gb", 3),)
    assert step.relayout.surge_nodes == 3
    assert step.relayout.wait_reason == f"surge_pending: short {SLICE}=1"
    again = step_relayout(step.relayout, replace(short, pool_target_nodes=3), T0, POLICY)
    assert again.effects == () and again.relayout.surge_nodes == 3
    ready = step_relayout(again.relayout, view(spare=2, target=3,
                                               pods=(POD, replace(POD, name="m-1"))), T0, POLICY)
    assert ready.relayout.phase is RelayoutPhase.CORDON


def test_surge_that_never_arrives_aborts_without_touching_the_node() -> None:
    short = view(spare=0)
    step = step_relayout(fresh(), short, T0 + timedelta(seconds=601), POLICY)
    assert step.relayout.phase is RelayoutPhase.ABORTED and step.effects == ()
    assert step.relayout.alert.startswith("surge_timeout")


def test_a_blocked_eviction_waits_with_its_reason_and_a_drain_timeout_gives_back_the_node(
) -> None:
    draining = draining_until(T0 + timedelta(seconds=1200))
    step = step_relayout(draining, view(cordoned=True), T0, POLICY)
    blocked = with_blocked_evictions(step.relayout, ("models/m-0",))
    assert blocked.phase is RelayoutPhase.DRAIN
    assert blocked.wait_reason == "eviction_blocked_by_pdb: models/m-0"
    late = step_relayout(blocked, view(cordoned=True), T0 + timedelta(seconds=1201), POLICY)
    assert late.relayout.phase is RelayoutPhase.ABORTED
    assert late.effects == (SetUnschedulable("a100-1", False),)
    assert late.relayout.alert == "drain_timeout: models/m-0 still running"


def test_a_failed_mig_config_rolls_back_then_uncordons_and_alerts() -> None:
    awaiting = replace(fresh(), phase=RelayoutPhase.AWAIT_MIG,
                       deadline_at=T0 + timedelta(seconds=300))
    failed = step_relayout(awaiting, view(cordoned=True, pods=(), config=TO, state="failed"),
                           T0, POLICY)
    assert failed.relayout.phase is RelayoutPhase.ROLLBACK
    back = step_relayout(failed.relayout, view(cordoned=True, pods=(), config=TO,
                                               state="failed"), T0, POLICY)
    assert back.effects == (LabelMigConfig("a100-1", "all-1g.10gb"),)
    assert back.relayout.phase is RelayoutPhase.AWAIT_ROLLBACK
    restored = step_relayout(back.relayout, view(cordoned=True, pods=()), T0, POLICY)
    assert restored.relayout.phase is RelayoutPhase.ROLLED_BACK
    assert restored.effects == (SetUnschedulable("a100-1", False),)
    assert restored.relayout.alert == "mig_config_failed"


def test_a_mig_manager_that_never_answers_times_out_into_rollback() -> None:
    awaiting = replace(fresh(), phase=RelayoutPhase.AWAIT_MIG,
                       deadline_at=T0 + timedelta(seconds=300))
    late = step_relayout(awaiting, view(cordoned=True, pods=(), config=TO, state="pending"),
                         T0 + timedelta(seconds=300), POLICY)
    assert late.relayout.phase is RelayoutPhase.ROLLBACK
    assert late.relayout.alert == "mig_config_timeout"


def test_a_failed_rollback_keeps_the_node_cordoned() -> None:
    rolling = replace(fresh(), phase=RelayoutPhase.AWAIT_ROLLBACK, alert="mig_config_failed",
                      deadline_at=T0 + timedelta(seconds=300))
    step = step_relayout(rolling, view(cordoned=True, pods=(), state="failed"), T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.FAILED and step.effects == ()
    assert step.relayout.alert == "mig_config_failed; rollback_failed"


def test_a_node_that_disappears_aborts_the_relayout() -> None:
    step = step_relayout(fresh(), view(exists=False), T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.ABORTED and step.relayout.alert == "node_gone"


def test_resuming_a_phase_whose_effect_already_happened_does_not_repeat_it() -> None:
    relabel = replace(fresh(), phase=RelayoutPhase.RELABEL)
    step = step_relayout(relabel, view(cordoned=True, pods=(), config=TO, state="success"),
                         T0, POLICY)
    assert step.effects == (WriteMigConfig(TO, LAYOUT),)  # no second label write
    done = step_relayout(step.relayout, view(cordoned=True, pods=(), config=TO), T0, POLICY)
    assert done.relayout.phase is RelayoutPhase.DONE


def test_a_node_someone_else_cordoned_before_the_relayout_did_is_recorded_and_left_cordoned(
) -> None:
    cordoning = replace(fresh(), phase=RelayoutPhase.CORDON)
    step = step_relayout(cordoning, view(cordoned=True, mine=False, present=False), T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.DRAIN
    assert step.effects == (WriteMigConfig(TO, LAYOUT),)  # the config still goes in first
    assert step.relayout.was_cordoned
    awaiting = replace(step.relayout, phase=RelayoutPhase.AWAIT_MIG)
    done = step_relayout(awaiting, view(cordoned=True, mine=False, pods=(), config=TO), T0,
                         POLICY)
    assert done.relayout.phase is RelayoutPhase.DONE and done.effects == ()
    assert done.relayout.wait_reason == (
        "left_cordoned: a100-1 was cordoned before the relayout; its cordon is not Headroom's")


def test_a_cordon_without_the_relayouts_marker_at_the_end_is_left_in_place() -> None:
    awaiting = replace(fresh(), phase=RelayoutPhase.AWAIT_MIG)
    done = step_relayout(awaiting, view(cordoned=True, mine=False, pods=(), config=TO), T0,
                         POLICY)
    assert done.relayout.phase is RelayoutPhase.DONE and done.effects == ()
    assert done.relayout.wait_reason == (
        "left_cordoned: a100-1's cordon lacks this relayout's marker (someone else's)")
    rolling = replace(fresh(), phase=RelayoutPhase.AWAIT_ROLLBACK, alert="mig_config_failed")
    back = step_relayout(rolling, view(cordoned=True, mine=False, pods=()), T0, POLICY)
    assert back.relayout.phase is RelayoutPhase.ROLLED_BACK and back.effects == ()
    draining = draining_until(T0)
    late = step_relayout(draining, view(cordoned=True, mine=False), T0, POLICY)
    assert late.relayout.phase is RelayoutPhase.ABORTED and late.effects == ()


def test_a_relayout_that_crashed_after_its_own_cordon_knows_the_cordon_is_its_own() -> None:
    cordoning = replace(fresh(), phase=RelayoutPhase.CORDON)
    step = step_relayout(cordoning, view(cordoned=True, mine=True), T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.DRAIN and not step.relayout.was_cordoned


def test_a_marker_left_on_a_node_someone_uncordoned_is_removed_at_the_end() -> None:
    awaiting = replace(fresh(), phase=RelayoutPhase.AWAIT_MIG)
    done = step_relayout(awaiting, view(cordoned=False, mine=True, pods=(), config=TO), T0,
                         POLICY)
    assert done.effects == (SetUnschedulable("a100-1", False),)
    assert done.relayout.wait_reason == ""


def test_terminal_relayouts_do_nothing() -> None:
    finished = replace(fresh(), phase=RelayoutPhase.DONE)
    assert step_relayout(finished, view(), T0, POLICY).effects == ()


def test_gpu_equivalents_count_mig_slices_as_sevenths() -> None:
    assert gpu_equivalent("nvidia.com/mig-3g.40gb", 2) == 6 / 7
    assert gpu_equivalent("nvidia.com/gpu", 2) == 2.0


def test_a_relayout_to_the_config_a_node_failed_is_refused_naming_node_label_and_state(
) -> None:
    assert same_config_refusal("a100-1", TO, "failed", TO) == (
        f"mig_config_not_applied: node a100-1 is labelled nvidia.com/mig.config={TO} with "
        "nvidia.com/mig.config.state=failed; relabelling to the same config does not re-run the "
        "MIG manager: fix the node by hand or lay it out to another config")
    assert "nvidia.com/mig.config.state=unset;" in same_config_refusal("a100-1", TO, "", TO)


def test_a_relayout_to_another_config_or_of_a_node_at_or_applying_its_config_is_not_refused(
) -> None:
    assert same_config_refusal("a100-1", "all-1g.10gb", "failed", TO) == ""
    for state in ("success", "pending", "rebooting"):
        assert same_config_refusal("a100-1", TO, state, TO) == "", state


BARE = PodOnNode("research", "notebook", ((SLICE, 1),))  # no controller would recreate it
BARE_WHY = ("unmanaged_pods: research/notebook (no controller would recreate it; delete or move "
            "it, then the drain goes on)")


def test_a_drain_never_evicts_a_pod_without_a_controller_and_waits_naming_it() -> None:
    draining = draining_until(T0 + timedelta(seconds=1200))
    step = step_relayout(draining, view(cordoned=True, pods=(POD, BARE)), T0, POLICY)
    assert step.relayout.phase is RelayoutPhase.DRAIN
    assert step.effects == ()  # not even the managed pod: an abort would move it for nothing
    assert step.relayout.wait_reason == BARE_WHY
    gone = step_relayout(step.relayout, view(cordoned=True, pods=(POD,)), T0, POLICY)
    assert gone.effects == (Evict("models", "m-0"),)  # deleted by someone: the drain goes on
    assert gone.relayout.wait_reason == "draining: models/m-0"


def test_a_drain_an_unmanaged_pod_holds_past_its_deadline_aborts_uncordons_and_names_it(
) -> None:
    draining = draining_until(T0 + timedelta(seconds=1200))
    late = step_relayout(draining, view(cordoned=True, pods=(BARE,)),
                         T0 + timedelta(seconds=1200), POLICY)
    assert late.relayout.phase is RelayoutPhase.ABORTED
    assert late.effects == (SetUnschedulable("a100-1", False),)
    assert late.relayout.alert == f"drain_timeout: research/notebook still running; {BARE_WHY}"


def test_a_relayout_of_a_node_running_an_unmanaged_pod_is_refused_naming_every_such_pod(
) -> None:
    other = replace(BARE, name="debug", requests=())
    assert held_pods_refusal("a100-1", (POD, BARE, other)) == (
        "node a100-1: unmanaged_pods: research/notebook, research/debug (no controller would "
        "recreate them; delete or move them, then the drain goes on)")
    assert held_pods_refusal("a100-1", (POD,)) == ""


def test_an_unmanaged_pod_asks_for_no_surge_since_it_is_never_moved() -> None:
    assert shortfall(view(pods=(POD, BARE, replace(BARE, name="b")), spare=1)) == {}
    assert shortfall(view(pods=(POD, replace(POD, name="m-1")), spare=1)) == {SLICE: 1}


KEPT = replace(POD, name="m-1", do_not_disrupt=True)  # karpenter.sh/do-not-disrupt: "true"
KEPT_WHY = ("do_not_disrupt: models/m-1 (karpenter.sh/do-not-disrupt=true; remove the annotation "
            "or move it, then the drain goes on)")


def test_a_drain_never_evicts_a_pod_that_asks_not_to_be_disrupted_and_waits_naming_it() -> None:
    draining = draining_until(T0 + timedelta(seconds=1200))
    step = step_relayout(draining, view(cordoned=True, pods=(POD, KEPT)), T0, POLICY)
    assert (step.relayout.phase, step.effects) == (RelayoutPhase.DRAIN, ())
    assert step.relayout.wait_reason == KEPT_WHY
    both = step_relayout(draining, view(cordoned=True, pods=(BARE, KEPT)), T0, POLICY)
    assert both.relayout.wait_reason == f"{BARE_WHY}; {KEPT_WHY}"
    assert held_pods_refusal("a100-1", (POD, KEPT)) == f"node a100-1: {KEPT_WHY}"
    assert shortfall(view(pods=(KEPT,), spare=0)) == {}  # it is not moved
