"""Node configs from the fleet plan on nodes whose GPUs pods a drain leaves hold (a user's
DaemonSet or static pod requesting GPUs, ``ObservedNode.undrained_gpu_pods``): the plan passes
such a node over for another node of the pool, or for none, and says why."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from test_node_plan import A100, MPS4, _mig, _node, _observed, _placement, _plan, _whole
from test_node_plan_properties import PROPERTY, nodes, placements

from controlplane.domain.actions import ApplySharing, RelayoutMig
from controlplane.domain.mig_layout import uniform
from controlplane.domain.node_plan import RELAYOUT_SKIPPED
from controlplane.domain.observed import ObservedNode
from controlplane.domain.placement import FleetPlacement

PROBE = "monitoring/gpu-probe-n1"
WANTS_1G = _placement(_mig("a", "g0", "1g.10gb"))


def _held(name: str, *pods: str, pool: str = "a100",
          profiles: tuple[tuple[str, ...], ...] = ((), ()), busy: int = 0) -> ObservedNode:
    """A node whose GPUs ``pods`` (namespace/name), left by a drain, hold."""
    return replace(_node(name, pool, profiles, busy), undrained_gpu_pods=pods)


def test_a_node_a_users_gpu_daemonset_holds_is_passed_over_for_the_pools_other_node() -> None:
    free = _plan(WANTS_1G, _observed(_node("n1"), _node("n2")))
    assert [a.node for a in free.actions] == ["n1"]  # the first by name, when none is held
    result = _plan(WANTS_1G, _observed(_held("n1", PROBE), _node("n2")))
    assert [(type(a), a.node) for a in result.actions] == [(RelayoutMig, "n2")]
    (relayout,) = result.actions
    assert isinstance(relayout, RelayoutMig)
    assert relayout.to_layout == uniform(A100, ("1g.10gb",))
    assert [(s.target, s.reason) for s in result.skipped] == [
        ("n1", f"{RELAYOUT_SKIPPED}:n1:gpu_daemon_pods:{PROBE}")]


def test_with_every_node_of_the_pool_held_nothing_is_re_laid_out_and_each_skip_names_its_pods(
        ) -> None:
    nodes = (_held("n1", PROBE), _held("n2", "team-a/gpu-burn-n2", "team-a/dcgm-n2"))
    result = _plan(WANTS_1G, _observed(*nodes))
    assert result.actions == ()
    assert [(s.target, s.reason) for s in result.skipped] == [
        ("n1", "relayout_skipped:n1:gpu_daemon_pods:monitoring/gpu-probe-n1"),
        ("n2", "relayout_skipped:n2:gpu_daemon_pods:team-a/gpu-burn-n2,team-a/dcgm-n2")]


def test_a_held_node_keeps_the_instances_the_plan_uses_and_is_not_named_as_passed_over() -> None:
    held = _held("n1", PROBE, profiles=(("1g.10gb",) * 7, ("7g.80gb",)), busy=1)
    result = _plan(WANTS_1G, _observed(held))
    assert result.actions == () and result.skipped == ()


def test_a_held_nodes_whole_gpu_sharing_still_changes_since_that_drains_nothing() -> None:
    held = _held("l1", "monitoring/gpu-probe-l1", pool="l4")
    result = _plan(_placement(_whole("e", "l0", mps=4)), _observed(held))
    assert [(type(a), a.node) for a in result.actions] == [(ApplySharing, "l1")]
    (sharing,) = result.actions
    assert isinstance(sharing, ApplySharing) and sharing.to_layout == MPS4
    assert result.skipped == ()


@PROPERTY
@given(nodes(), placements(), st.data())
def test_no_generated_plan_re_lays_out_a_held_node_and_only_held_nodes_are_named_passed_over(
        fleet: tuple[ObservedNode, ...], placement: FleetPlacement, data: st.DataObject) -> None:
    held = data.draw(st.sets(st.sampled_from([n.name for n in fleet])) if fleet else st.just(set()))
    observed = _observed(*(replace(n, undrained_gpu_pods=(f"ns/probe-{n.name}",))
                           if n.name in held else n for n in fleet))
    result = _plan(placement, observed)
    assert not [a for a in result.actions if isinstance(a, RelayoutMig) and a.node in held]
    passed = [s for s in result.skipped if s.reason.startswith(RELAYOUT_SKIPPED)]
    assert all(s.target in held and s.reason == (f"{RELAYOUT_SKIPPED}:{s.target}:gpu_daemon_pods:"
                                                 f"ns/probe-{s.target}") for s in passed)
