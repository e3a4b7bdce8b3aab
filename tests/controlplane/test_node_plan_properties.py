"""Properties of the node plan over generated fleets: valid layouts, no action on nodes that must
be left alone, the drain budget, convergence, determinism."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane.domain.actions import ApplySharing, NodeAction, RelayoutMig
from controlplane.domain.desired import PoolSpec
from controlplane.domain.guards import GuardMemory
from controlplane.domain.mig_layout import (
    DeviceGroupLayout,
    NodeMigLayout,
    layout_problems,
    uniform,
)
from controlplane.domain.models import SharingMode
from controlplane.domain.node_configs import EXCLUSIVE
from controlplane.domain.node_plan import NodeConfigLimits, NodeConfigPlan, node_config_plan
from controlplane.domain.observed import ObservedGpu, ObservedNode, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.sharing_config import SharingLayout

T0 = datetime(2026, 1, 5, tzinfo=UTC)
A100 = "A100-80GB"
POOLS = (PoolSpec("a100", A100, 2, 0, 8, 2.0), PoolSpec("l4", "L4", 2, 0, 8, 0.8))
PRODUCT_OF = {"a100": A100, "l4": "L4"}
SETS = (("7g.80gb",), ("3g.40gb", "4g.40gb"), ("3g.40gb", "3g.40gb"),
        ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"), ("1g.10gb", "2g.20gb", "2g.20gb", "2g.20gb"),
        ("1g.10gb",) * 7, ("1g.10gb", "2g.20gb", "4g.40gb"), ("1g.20gb",) * 4, ("4g.40gb",),
        ("1g.10gb",))
SHARINGS = (EXCLUSIVE, SharingLayout(SharingMode.MPS, 2), SharingLayout(SharingMode.MPS, 4),
            SharingLayout(SharingMode.TIME_SLICING, 2))
LIMITS = NodeConfigLimits(max_in_flight=1, settle_s=600)
PROPERTY = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def test_the_generated_mig_sets_are_valid_a100_geometries() -> None:
    assert all(layout_problems(uniform(A100, s)) == [] for s in SETS)


# -- generated inputs ---------------------------------------------------------------------------
@st.composite
def nodes(draw: st.DrawFn) -> tuple[ObservedNode, ...]:
    out = []
    for i in range(draw(st.integers(0, 5))):
        pool = draw(st.sampled_from(("a100", "l4")))
        product = PRODUCT_OF[pool]
        sharing = draw(st.sampled_from(SHARINGS))
        gpus = []
        for g in range(draw(st.sampled_from((2, 2, 2, 0, 1, 3)))):
            profiles: tuple[str, ...] = ()
            if pool == "a100" and draw(st.booleans()):
                profiles = draw(st.sampled_from(SETS))
            # all-enabled: MIG on without instances
            mig_on = bool(profiles) or (pool == "a100" and draw(st.integers(0, 5)) == 0)
            gpus.append(ObservedGpu(g, product, 81920, pool == "a100", profiles,
                                    "mig" if mig_on else sharing.mode.value,
                                    1 if mig_on else sharing.replicas, mig_on))
        out.append(ObservedNode(f"n{i}", pool, product, draw(st.booleans()) or
                                draw(st.booleans()), 64_000, 500_000, tuple(gpus),
                                cordoned=draw(st.integers(0, 4)) == 0,
                                gpu_pods=draw(st.sampled_from((0, 0, 1, 3)))))
    return tuple(out)


@st.composite
def placements(draw: st.DrawFn) -> FleetPlacement:
    segments: list[PlacedSegment] = []
    for g in range(draw(st.integers(0, 6))):
        product = draw(st.sampled_from((A100, A100, "L4", "T4")))
        kind = draw(st.sampled_from(("mig", "whole", "mps", "time_sliced", "sized"))
                    if product == A100 else st.sampled_from(("whole", "mps", "time_sliced")))
        gpu = f"{product}/{g}"
        if kind == "mig":
            mode = draw(st.sampled_from(("mig", "mig", "mps")))  # MPS processes on a slice
            segments.extend(PlacedSegment("m", gpu, product, mode, p, 0, int(p[0]), 1.0,
                                          2 if mode == "mps" else 1)
                            for p in draw(st.sampled_from(SETS)))
        elif kind == "mps":
            clients = draw(st.sampled_from((2, 4)))
            segments.extend(PlacedSegment("m", gpu, product, "mps", "", 0, 0, 1.0, clients)
                            for _ in range(draw(st.integers(1, clients))))
        elif kind == "time_sliced":
            segments.extend(PlacedSegment("m", gpu, product, "time_sliced", "", 0, 0, 1.0)
                            for _ in range(draw(st.integers(1, 3))))
        else:
            segments.append(PlacedSegment("m", gpu, product,
                                          "sized" if kind == "sized" else "exclusive",
                                          "", 0, 0, 1.0))
    return FleetPlacement(1, tuple(segments), (), (), 0.0, ())


@st.composite
def in_flights(draw: st.DrawFn, observed: tuple[ObservedNode, ...]
               ) -> dict[str, NodeMigLayout]:
    names = [n.name for n in observed if n.pool == "a100"] + ["ghost"]
    chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=2))
    off = NodeMigLayout(A100, (DeviceGroupLayout((), (), False),))
    return {name: draw(st.sampled_from((off, *(uniform(A100, s) for s in SETS))))
            for name in chosen}


def _plan(placement: FleetPlacement, observed: tuple[ObservedNode, ...],
          in_flight: dict[str, NodeMigLayout] | None = None, memory: GuardMemory | None = None,
          limits: NodeConfigLimits = LIMITS, now: datetime = T0
          ) -> NodeConfigPlan:
    return node_config_plan(placement, ObservedState(T0, (), observed, ()), POOLS,
                            in_flight or {}, memory or GuardMemory(), limits, now)


def _applied(observed: tuple[ObservedNode, ...], actions: tuple[NodeAction, ...]
             ) -> tuple[ObservedNode, ...]:
    """The nodes once ``actions`` are done (layouts, then sharing)."""
    by_name = {n.name: n for n in observed}
    for action in actions:
        node = by_name[action.node]
        if isinstance(action, RelayoutMig):
            layout = action.to_layout
            gpus = tuple(replace(g, mig_layout=layout.profiles_of(g.index),
                                 mig_enabled=layout.mig_enabled_on(g.index),
                                 sharing="mig" if layout.mig_enabled_on(g.index)
                                 else g.sharing if g.sharing != "mig" else "exclusive",
                                 sharing_replicas=1 if layout.mig_enabled_on(g.index)
                                 or g.sharing == "mig" else g.sharing_replicas)
                         for g in node.gpus)
        else:
            assert isinstance(action, ApplySharing)
            gpus = tuple(g if g.mig_enabled else replace(
                g, sharing=action.to_layout.mode.value,
                sharing_replicas=action.to_layout.replicas) for g in node.gpus)
        by_name[action.node] = replace(node, gpus=gpus)
    return tuple(by_name[n.name] for n in observed)


# -- properties ---------------------------------------------------------------------------------
@PROPERTY
@given(st.data())
def test_every_planned_layout_is_a_valid_geometry_and_no_node_must_be_left_alone(
        data: st.DataObject) -> None:
    observed = data.draw(nodes())
    placement = data.draw(placements())
    in_flight = data.draw(in_flights(observed))
    max_in_flight = data.draw(st.integers(0, 3))
    limits = NodeConfigLimits(max_in_flight, data.draw(st.sampled_from((0.0, 600.0))))
    result = _plan(placement, observed, in_flight, limits=limits)
    by_name = {n.name: n for n in observed}
    relayouts = [a for a in result.actions if isinstance(a, RelayoutMig)]
    for action in result.actions:
        node = by_name[action.node]
        assert node.ready and not node.cordoned and node.name not in in_flight
        assert node.gpus
    for action in relayouts:
        assert layout_problems(action.to_layout) == []
        gpus = by_name[action.node].gpus
        now = [(tuple(sorted(g.mig_layout)), g.mig_enabled) for g in gpus]
        assert [(tuple(sorted(action.from_layout.profiles_of(g.index))),
                 action.from_layout.mig_enabled_on(g.index)) for g in gpus] == now
        assert [(tuple(sorted(action.to_layout.profiles_of(g.index))),
                 action.to_layout.mig_enabled_on(g.index)) for g in gpus] != now
    assert len({a.node for a in relayouts}) == len(relayouts)
    busy = [a for a in relayouts if by_name[a.node].gpu_pods > 0]
    assert len(busy) <= max(0, max_in_flight - len(in_flight))
    assert result == _plan(placement, observed, in_flight, limits=limits)


@PROPERTY
@given(st.data())
def test_planning_again_once_the_actions_are_done_reaches_a_plan_with_nothing_to_do(
        data: st.DataObject) -> None:
    # sharing waits for a node's re-layout, a pool's nodes are re-laid out one per round, and a
    # new layout can make a kept GPU spare for the next plan: a few rounds, never an oscillation
    observed = data.draw(nodes())
    placement = data.draw(placements())
    limits = NodeConfigLimits(len(observed), 0.0)
    done, memory, rounds = observed, GuardMemory(), []
    for _ in range(len(observed) + 4):
        result = _plan(placement, done, memory=memory, limits=limits)
        rounds.append(result.actions)
        assert all(s.reason.startswith("pool_relayout_in_flight:") for s in result.skipped)
        done, memory = _applied(done, result.actions), result.memory
    assert rounds[-1] == () and rounds[-2] == ()


@PROPERTY
@given(st.data())
def test_a_pool_never_has_two_re_layouts_and_a_held_one_names_the_pools_re_layout(
        data: st.DataObject) -> None:
    observed = data.draw(nodes())
    in_flight = data.draw(in_flights(observed))
    limits = NodeConfigLimits(data.draw(st.integers(0, 3)), data.draw(st.sampled_from((0.0,
                                                                                       600.0))))
    result = _plan(data.draw(placements()), observed, in_flight, limits=limits)
    pool_of = {n.name: n.pool for n in observed}
    started = [a.node for a in result.actions if isinstance(a, RelayoutMig)]
    running = {pool_of[n]: n for n in sorted(in_flight, reverse=True) if n in pool_of}
    assert not {pool_of[n] for n in started} & set(running)
    assert len({pool_of[n] for n in started}) == len(started)
    holders = {**running, **{pool_of[n]: n for n in started}}
    for held in result.skipped:
        if held.reason.startswith("pool_relayout_in_flight:"):
            pool = pool_of[held.target]
            assert held.reason == f"pool_relayout_in_flight:{pool}/{holders[pool]}"


@PROPERTY
@given(st.data())
def test_nodes_already_holding_every_planned_instance_are_not_re_laid_out(
        data: st.DataObject) -> None:
    observed = data.draw(nodes())
    usable = [n for n in observed if n.pool == "a100" and n.ready and not n.cordoned]
    held = Counter(p for n in usable for g in n.gpus for p in g.mig_layout)
    placement = data.draw(placements())
    mig_only = tuple(s for s in placement.segments if s.mode == "mig" and s.product == A100)
    planned = Counter(s.mig_profile for s in mig_only)
    if planned - held:
        return
    result = _plan(replace(placement, segments=mig_only), observed)
    assert not [a for a in result.actions if isinstance(a, RelayoutMig)]
    assert result.skipped == ()


def test_a_node_with_a_product_the_pools_do_not_list_gets_no_action() -> None:
    node = ObservedNode("x", "h100", "H100-80GB", True, 1, 1,
                        (ObservedGpu(0, "H100-80GB", 81559, True),))
    placement = FleetPlacement(1, (PlacedSegment("m", "H/0", "H100-80GB", "mig", "1g.10gb", 0,
                                                 1, 1.0),), (), (), 0.0, ())
    assert _plan(placement, (node,)).actions == ()


def test_a_busy_node_is_re_laid_out_once_the_plan_asked_for_settle_s() -> None:
    node = ObservedNode("n0", "a100", A100, True, 1, 1,
                        tuple(ObservedGpu(i, A100, 81920, True, ("7g.80gb",), "mig")
                              for i in range(2)), gpu_pods=2)
    placement = FleetPlacement(1, (PlacedSegment("m", "A/0", A100, "mig", "1g.10gb", 0, 1, 1.0),),
                               (), (), 0.0, ())
    first = _plan(placement, (node,))
    assert first.actions == ()
    later = _plan(placement, (node,), memory=first.memory, now=T0 + timedelta(seconds=600))
    assert [a.node for a in later.actions] == ["n0"]


@PROPERTY
@given(st.data())
def test_every_change_held_back_to_settle_is_made_once_the_plan_has_asked_for_settle_s(
        data: st.DataObject) -> None:
    observed = data.draw(nodes())
    placement = data.draw(placements())
    limits = NodeConfigLimits(len(observed), 600.0, one_per_pool=False)  # settling alone
    first = _plan(placement, observed, limits=limits)
    assert {s.reason for s in first.skipped} <= {"relayout_settling", "sharing_settling"}
    later = _plan(placement, observed, memory=first.memory, limits=limits,
                  now=T0 + timedelta(seconds=600))
    held = {(s.target, s.reason) for s in first.skipped}
    made = {(a.node, "relayout_settling" if isinstance(a, RelayoutMig) else "sharing_settling")
            for a in later.actions}
    assert held <= made and later.skipped == ()
    by_name = {n.name: n for n in observed}
    # at once on a busy node: no re-layout, and sharing only to more clients per GPU
    assert all(by_name[a.node].gpu_pods == 0 for a in first.actions
               if isinstance(a, RelayoutMig))
    assert all(by_name[a.node].gpu_pods == 0 or a.to_value >= a.from_value
               for a in first.actions if isinstance(a, ApplySharing)
               and a.reason != "exclusive_before_mig")
