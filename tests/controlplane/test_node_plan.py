"""Node configs from the fleet plan: which nodes are re-laid out or re-shared, and when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.domain.actions import ApplySharing, RelayoutMig
from controlplane.domain.desired import PoolSpec
from controlplane.domain.guards import GuardMemory
from controlplane.domain.mig_layout import (
    DeviceGroupLayout,
    NodeMigLayout,
    layout_problems,
    uniform,
)
from controlplane.domain.models import SharingMode
from controlplane.domain.node_configs import (
    EXCLUSIVE,
    EXCLUSIVE_GPUS,
    GpuConfig,
    mig_layout_of,
    planned_configs,
)
from controlplane.domain.node_plan import (
    POOL_RELAYOUT_IN_FLIGHT,
    RELAYOUT_BUDGET,
    RELAYOUT_SETTLING,
    NodeConfigLimits,
    NodeConfigPlan,
    node_config_plan,
)
from controlplane.domain.observed import ObservedGpu, ObservedNode, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.sharing_config import SharingLayout

T0 = datetime(2026, 1, 5, tzinfo=UTC)
A100 = "A100-80GB"
POOLS = (PoolSpec("a100", A100, 2, 0, 8, 2.0), PoolSpec("l4", "L4", 2, 0, 8, 0.8))
LIMITS = NodeConfigLimits(max_in_flight=1, settle_s=600)
MPS4 = SharingLayout(SharingMode.MPS, 4)


def _mig(model: str, gpu: str, profile: str, start: int = 0) -> PlacedSegment:
    return PlacedSegment(model, gpu, A100, "mig", profile, start, int(profile[0]), 10.0)


def _whole(model: str, gpu: str, product: str = "L4", mps: int = 1) -> PlacedSegment:
    return PlacedSegment(model, gpu, product, "mps" if mps > 1 else "exclusive", "", 0, 0, 10.0,
                         mps)


def _placement(*segments: PlacedSegment) -> FleetPlacement:
    return FleetPlacement(1, segments, (), (), 0.0, ())


def _node(name: str, pool: str = "a100", profiles: tuple[tuple[str, ...], ...] = ((), ()),
          pods: int = 0, sharing: SharingLayout = EXCLUSIVE, ready: bool = True,
          cordoned: bool = False) -> ObservedNode:
    product = A100 if pool == "a100" else "L4"
    gpus = tuple(ObservedGpu(i, product, 81920, pool == "a100", p,
                             "mig" if p else sharing.mode.value, sharing.replicas)
                 for i, p in enumerate(profiles))
    return ObservedNode(name, pool, product, ready, 64_000, 500_000, gpus, cordoned,
                        gpu_pods=pods)


def _observed(*nodes: ObservedNode) -> ObservedState:
    return ObservedState(T0, (), nodes, ())


def _plan(placement: FleetPlacement, observed: ObservedState,
          in_flight: dict[str, NodeMigLayout] | None = None,
          memory: GuardMemory | None = None, now: datetime = T0,
          limits: NodeConfigLimits = LIMITS) -> NodeConfigPlan:
    return node_config_plan(placement, observed, POOLS, in_flight or {},
                            memory or GuardMemory(), limits, now)


THREE_AND_FOUR = ("3g.40gb", "4g.40gb")


def test_planned_configs_group_segments_by_gpu_and_take_mps_clients_from_the_profile() -> None:
    configs = planned_configs(_placement(
        _mig("a", "g0", "4g.40gb"), _mig("b", "g0", "3g.40gb", 4),
        _whole("c", "l0", mps=4), _whole("d", "l1")))
    assert configs == {A100: [GpuConfig(("3g.40gb", "4g.40gb"))],
                       "L4": [GpuConfig((), MPS4), GpuConfig()]}


def test_each_gpu_of_a_replica_of_several_gpus_is_planned_as_a_whole_exclusive_gpu() -> None:
    # a replica of 4 GPUs is a segment on each: 4 whole GPUs, of the kind exclusive nodes have
    tensor_parallel = tuple(PlacedSegment("llama", f"g{i}", A100, "exclusive", "", 0, 0, 5.0,
                                          gpus=4, gpu_index=i) for i in range(4))
    configs = planned_configs(_placement(*tensor_parallel))
    assert configs == {A100: [GpuConfig()] * 4}
    assert {c.kind for c in configs[A100]} == {EXCLUSIVE_GPUS}


def test_a_sizing_placeholder_without_layouts_plans_no_node_change() -> None:
    placement = _placement(PlacedSegment("a", "A100-80GB-0", A100, "sized", "", 0, 0, 5.0))
    result = _plan(placement, _observed(_node("n1")))
    assert result.actions == () and result.skipped == ()


def test_an_empty_node_is_laid_out_at_once_for_instances_no_node_holds() -> None:
    placement = _placement(_mig("a", "g0", "4g.40gb"), _mig("b", "g0", "3g.40gb", 4))
    result = _plan(placement, _observed(_node("n1")))
    assert len(result.actions) == 1
    action = result.actions[0]
    assert isinstance(action, RelayoutMig) and action.node == "n1"
    # the spare GPU of a node re-laid out anyway takes the node's planned set
    assert action.to_layout == uniform(A100, THREE_AND_FOUR)
    assert layout_problems(action.to_layout) == []


def test_spare_gpus_of_a_node_laid_out_anyway_take_the_plans_instance_mix() -> None:
    sevens = tuple(_mig("a", f"g{g}", "1g.10gb", i) for g in (0, 1) for i in range(7))
    placement = _placement(*sevens, _mig("b", "g2", "7g.80gb"))
    result = _plan(placement, _observed(_node("n1", profiles=((),) * 4)))
    action = result.actions[0]
    assert isinstance(action, RelayoutMig)
    per_gpu = [action.to_layout.profiles_of(i) for i in range(4)]
    assert sorted(per_gpu) == sorted([("1g.10gb",) * 7] * 3 + [("7g.80gb",)])


def test_gpus_whose_instances_the_plan_can_use_are_kept_however_the_plan_packed_them() -> None:
    # the plan packs 3g + 4g on one GPU; the node holds them on two GPUs: nothing to change
    placement = _placement(_mig("a", "g0", "4g.40gb"), _mig("b", "g0", "3g.40gb", 4))
    node = _node("n1", profiles=(("4g.40gb",), ("3g.40gb", "3g.40gb")), pods=2)
    assert _plan(placement, _observed(node)).actions == ()


def test_a_busy_node_waits_for_the_plan_to_settle_then_for_room_in_the_drain_budget() -> None:
    placement = _placement(_mig("a", "g0", "1g.10gb"), _mig("a", "g0", "1g.10gb", 1))
    busy = _node("n1", profiles=(("7g.80gb",), ("7g.80gb",)), pods=2)
    first = _plan(placement, _observed(busy))
    assert first.actions == ()
    assert [s.reason for s in first.skipped] == [RELAYOUT_SETTLING]
    later = T0 + timedelta(seconds=600)
    settled = _plan(placement, _observed(busy), memory=first.memory, now=later)
    assert [(a.node, a.reason) for a in settled.actions] == [("n1", "plan_needs_mig_instances")]
    waiting = _plan(placement, _observed(busy), memory=first.memory, now=later,
                    in_flight={"n9": uniform(A100, ("7g.80gb",))})
    assert waiting.actions == ()
    assert [s.reason for s in waiting.skipped] == [RELAYOUT_BUDGET]


def test_a_plan_that_changes_its_mind_restarts_the_settling_clock() -> None:
    busy = _node("n1", profiles=(("7g.80gb",), ("7g.80gb",)), pods=2)
    first = _plan(_placement(_mig("a", "g0", "1g.10gb")), _observed(busy))
    other = _plan(_placement(_mig("a", "g0", "2g.20gb")), _observed(busy), memory=first.memory,
                  now=T0 + timedelta(seconds=600))
    assert other.actions == () and [s.reason for s in other.skipped] == [RELAYOUT_SETTLING]


def test_a_node_that_no_longer_needs_a_change_forgets_its_settling_clock() -> None:
    busy = _node("n1", profiles=(("7g.80gb",), ("7g.80gb",)), pods=2)
    first = _plan(_placement(_mig("a", "g0", "1g.10gb")), _observed(busy))
    assert first.memory.history
    calm = _plan(_placement(_mig("a", "g0", "7g.80gb")), _observed(busy), memory=first.memory)
    assert calm.actions == () and calm.memory.history == ()


def test_an_empty_node_is_preferred_over_a_busy_one_for_new_instances() -> None:
    placement = _placement(_mig("a", "g0", "1g.10gb"))
    busy = _node("n1", profiles=(("7g.80gb",), ("7g.80gb",)), pods=2)
    empty = _node("n2", profiles=(("7g.80gb",), ("7g.80gb",)))
    result = _plan(placement, _observed(busy, empty))
    assert [a.node for a in result.actions] == ["n2"] and result.skipped == ()


def test_nodes_not_ready_cordoned_or_re_laying_out_get_no_action() -> None:
    placement = _placement(_mig("a", "g0", "1g.10gb"), _mig("b", "g1", "1g.10gb"),
                           _mig("c", "g2", "1g.10gb"))
    result = _plan(placement, _observed(_node("n1", ready=False), _node("n2", cordoned=True),
                                        _node("n3")),
                   in_flight={"n3": uniform(A100, ("1g.10gb",))})
    assert result.actions == ()


def test_a_node_re_laying_out_counts_as_its_target() -> None:
    placement = _placement(_mig("a", "g0", "1g.10gb"))
    result = _plan(placement, _observed(_node("n1"), _node("n2")),
                   in_flight={"n1": uniform(A100, ("1g.10gb",))})
    assert result.actions == ()  # n2 is not laid out for what n1 will hold


def test_whole_gpus_switch_to_mps_at_once_without_a_drain() -> None:
    placement = _placement(_whole("c", "l0", mps=4), _whole("c", "l1", mps=4))
    node = _node("l-1", pool="l4", pods=2)
    result = _plan(placement, _observed(node))
    assert result.actions == (ApplySharing("l-1", EXCLUSIVE, MPS4, "plan_needs_mps_4"),)


def test_an_mps_node_becomes_exclusive_before_its_mig_re_layout() -> None:
    placement = _placement(_mig("a", "g0", "7g.80gb"))
    node = _node("n1", sharing=MPS4)
    result = _plan(placement, _observed(node))
    kinds = [(type(a).__name__, a.reason) for a in result.actions]
    assert kinds == [("ApplySharing", "exclusive_before_mig"), ("RelayoutMig", "plan_needs_mig")]
    assert result.actions[0].to_layout == EXCLUSIVE


def test_a_mig_node_the_plan_wants_whole_and_shared_is_re_laid_out_first_and_shared_after() -> (
        None):
    placement = _placement(_whole("c", "g0", product=A100, mps=4))
    node = _node("n1", profiles=(("7g.80gb",), ("7g.80gb",)))
    first = _plan(placement, _observed(node))
    relayout = first.actions[0]
    assert isinstance(relayout, RelayoutMig) and len(first.actions) == 1
    assert relayout.reason == "plan_needs_whole_gpus"
    assert not relayout.to_layout.is_mig_enabled()
    done = _node("n1")
    after = _plan(placement, _observed(done))
    assert after.actions == (ApplySharing("n1", EXCLUSIVE, MPS4, "plan_needs_mps_4"),)


def test_a_node_of_another_kind_keeping_planned_gpus_never_changes_kind() -> None:
    # n1 serves the planned whole GPUs; the MIG instance waits for a node (pool scale-up)
    placement = _placement(_whole("c", "g0", product=A100), _mig("a", "g1", "1g.10gb"))
    node = _node("n1", pods=1)
    result = _plan(placement, _observed(node))
    assert result.actions == ()


def test_the_plan_is_the_same_for_the_same_input() -> None:
    placement = _placement(_mig("a", "g0", "1g.10gb"), _mig("b", "g1", "3g.40gb"),
                           _whole("c", "l0", mps=4))
    observed = _observed(_node("n1"), _node("n2", pods=1), _node("l-1", pool="l4"))
    assert _plan(placement, observed) == _plan(placement, observed)


def test_a_node_layout_with_different_gpus_lists_each_gpu_group() -> None:
    layout = mig_layout_of(A100, [("1g.10gb",), ("7g.80gb",), ("1g.10gb",)])
    assert layout.profiles_of(0) == ("1g.10gb",) and layout.profiles_of(1) == ("7g.80gb",)
    assert layout.profiles_of(2) == ("1g.10gb",) and layout_problems(layout) == []


def _all_enabled(name: str) -> ObservedNode:
    """mig-parted's all-enabled: MIG mode on, no instances (the GPUs serve nothing)."""
    gpus = tuple(ObservedGpu(i, A100, 81920, True, (), "mig", 1, mig_enabled=True)
                 for i in range(2))
    return ObservedNode(name, "a100", A100, True, 64_000, 500_000, gpus)


def test_a_node_with_mig_on_and_no_instances_is_turned_whole_when_the_plan_needs_whole_gpus(
        ) -> None:
    result = _plan(_placement(_whole("c", "g0", product=A100)), _observed(_all_enabled("n1")))
    assert len(result.actions) == 1
    relayout = result.actions[0]
    assert isinstance(relayout, RelayoutMig) and relayout.reason == "plan_needs_whole_gpus"
    assert relayout.from_layout.is_mig_enabled() and not relayout.to_layout.is_mig_enabled()


def test_a_node_with_mig_on_and_no_instances_is_laid_out_for_the_instances_the_plan_needs(
        ) -> None:
    placement = _placement(_mig("a", "g0", "4g.40gb"), _mig("b", "g0", "3g.40gb", 4))
    result = _plan(placement, _observed(_all_enabled("n1")))
    relayout = result.actions[0]
    assert isinstance(relayout, RelayoutMig) and relayout.reason == "plan_needs_mig_instances"
    assert relayout.to_layout == uniform(A100, THREE_AND_FOUR)


def test_a_busy_node_goes_to_fewer_clients_per_gpu_only_once_the_plan_has_settled() -> None:
    placement = _placement(_whole("c", "l0"), _whole("c", "l1"))  # exclusive GPUs
    busy = _observed(_node("l-1", pool="l4", pods=3, sharing=MPS4))
    first = _plan(placement, busy)
    assert first.actions == ()
    assert [(s.target, s.reason) for s in first.skipped] == [("l-1", "sharing_settling")]
    later = _plan(placement, busy, memory=first.memory, now=T0 + timedelta(seconds=600))
    assert later.actions == (ApplySharing("l-1", MPS4, EXCLUSIVE, "plan_needs_exclusive"),)
    empty = _plan(placement, _observed(_node("l-1", pool="l4", sharing=MPS4)))
    assert empty.actions == (ApplySharing("l-1", MPS4, EXCLUSIVE, "plan_needs_exclusive"),)


WHOLE_7G = (("7g.80gb",), ("7g.80gb",))
THREE_GPUS_OF_1G = _placement(_mig("a", "g0", "1g.10gb"), _mig("b", "g1", "1g.10gb"),
                              _mig("c", "g2", "1g.10gb"))  # more than one node's two GPUs


def test_a_pools_nodes_are_re_laid_out_one_at_a_time_even_when_empty() -> None:
    wide = NodeConfigLimits(max_in_flight=5, settle_s=600)
    result = _plan(THREE_GPUS_OF_1G, _observed(_node("n1", profiles=WHOLE_7G),
                                               _node("n2", profiles=WHOLE_7G)), limits=wide)
    assert [a.node for a in result.actions if isinstance(a, RelayoutMig)] == ["n1"]
    assert [(s.target, s.reason) for s in result.skipped] == [
        ("n2", f"{POOL_RELAYOUT_IN_FLIGHT}:a100/n1")]


def test_a_re_layout_waits_while_its_pool_has_one_in_flight_naming_it_whatever_the_budget(
        ) -> None:
    wide = NodeConfigLimits(max_in_flight=5, settle_s=0)
    result = _plan(THREE_GPUS_OF_1G, _observed(
        _node("n1", profiles=WHOLE_7G), _node("n2", profiles=WHOLE_7G, pods=2),
        _node("n3", profiles=WHOLE_7G), _node("l-1", pool="l4")),
        in_flight={"n3": uniform(A100, ("7g.80gb",))}, limits=wide)
    assert [a for a in result.actions if isinstance(a, RelayoutMig)] == []
    assert {(s.target, s.reason) for s in result.skipped} == {
        ("n1", f"{POOL_RELAYOUT_IN_FLIGHT}:a100/n3"), ("n2", f"{POOL_RELAYOUT_IN_FLIGHT}:a100/n3")}


def test_an_empty_node_takes_its_pools_re_layout_before_a_busy_one() -> None:
    result = _plan(THREE_GPUS_OF_1G, _observed(_node("n1", profiles=WHOLE_7G, pods=2),
                                               _node("n2", profiles=WHOLE_7G)),
                   limits=NodeConfigLimits(max_in_flight=5, settle_s=0))
    assert [a.node for a in result.actions if isinstance(a, RelayoutMig)] == ["n2"]
    assert [(s.target, s.reason) for s in result.skipped] == [
        ("n1", f"{POOL_RELAYOUT_IN_FLIGHT}:a100/n2")]


def test_a_re_layout_in_another_pool_holds_only_the_global_budget() -> None:
    l4_whole = NodeMigLayout("L4", (DeviceGroupLayout((), (), False),))
    result = _plan(_placement(_mig("a", "g0", "1g.10gb")),
                   _observed(_node("n1", profiles=WHOLE_7G), _node("l-9", pool="l4", pods=2)),
                   in_flight={"l-9": l4_whole})
    assert [a.node for a in result.actions if isinstance(a, RelayoutMig)] == ["n1"]
