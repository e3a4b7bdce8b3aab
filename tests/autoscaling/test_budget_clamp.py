"""GPU budgets and pool capacity trim a demand in a few packings, however large: the clamp finds
its cut by bisection, with the same result as trimming one unit at a time (kept here as the
reference), and a 1e7-rps demand (MAX_HINT_RPS, a demand hint's cap) clamps in a bounded number
of ``pack_gpus`` calls."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.autoscaling import sizing
from controlplane.autoscaling.sizing import (
    CLUSTER_BUDGET,
    ModelRequest,
    ReplicaShape,
    apply_gpu_budgets,
)
from controlplane.domain.desired import PoolSpec
from controlplane.domain.hints import MAX_HINT_RPS

_EPS = 1e-9


def _reference_trim(request: ModelRequest, shape: ReplicaShape, rungs: Sequence[str]
                    ) -> ModelRequest | None:
    for rung in rungs:
        costs = shape.idle_gpu_fraction > 0 if rung == "idle" else True
        if costs and getattr(request, rung) > 0:
            return replace(request, **{rung: getattr(request, rung) - 1})
    return None


def _reference_clamp(requests: dict[str, ModelRequest], shapes: Mapping[str, ReplicaShape],
                     members: Sequence[str], budget_gpus: float, reason: str,
                     pools: Sequence[PoolSpec] = ()) -> None:
    """The clamp before bisection: one unit per pass, every GPU repacked each time."""
    def fits() -> bool:
        mine = [requests[m] for m in members]
        return sizing.placed_gpus(mine, shapes) <= budget_gpus + _EPS and (
            not pools or sizing._nodes_hold(mine, shapes, pools,
                                            math.floor(budget_gpus + _EPS)))

    for rungs in (("cached", "idle"), ("hot",)):
        while not fits():
            trimmable = {m: t for m in members
                         if (t := _reference_trim(requests[m], shapes[m], rungs)) is not None}
            if not trimmable:
                break
            largest = max(trimmable, key=lambda m: (requests[m].gpus(shapes[m]), m))
            requests[largest] = replace(trimmable[largest], reason=reason)


_SHARES = st.sampled_from([1.0, 0.5, 3 / 7, 0.3, 0.25, 0.6, 2.0, 1 / 3])
_PRODUCTS = st.sampled_from(["A100-80GB", "H100-80GB"])


@st.composite
def _fleets(draw: st.DrawFn) -> tuple[dict[str, ReplicaShape], list[ModelRequest]]:
    count = draw(st.integers(1, 4))
    shapes, requests = {}, []
    for i in range(count):
        name = f"m{i}"
        shapes[name] = ReplicaShape(name, draw(st.sampled_from(["acme", "globex"])),
                                    draw(_PRODUCTS), draw(_SHARES), 10.0,
                                    draw(st.sampled_from([0.0, 0.5, 1.0])))
        requests.append(ModelRequest(name, draw(st.integers(0, 14)), draw(st.integers(0, 4)),
                                     draw(st.integers(0, 4)), "sized"))
    return shapes, requests


@settings(max_examples=300, deadline=None)
@given(fleet=_fleets(), budget=st.integers(0, 30), gpus_per_node=st.sampled_from([1, 2, 4, 8]),
       max_nodes=st.integers(0, 4), with_pools=st.booleans())
def test_the_clamp_cuts_where_trimming_one_unit_at_a_time_did(
        fleet: tuple[dict[str, ReplicaShape], list[ModelRequest]], budget: int,
        gpus_per_node: int, max_nodes: int, with_pools: bool) -> None:
    shapes, requests = fleet
    pools = tuple(PoolSpec(f"p-{product}", product, gpus_per_node, 0, max_nodes, 2.0)
                  for product in sorted({s.product for s in shapes.values()})) if with_pools else ()
    members = [r.model for r in requests]
    fast, slow = {r.model: r for r in requests}, {r.model: r for r in requests}
    sizing._clamp(fast, shapes, members, float(budget), CLUSTER_BUDGET, pools)
    _reference_clamp(slow, shapes, members, float(budget), CLUSTER_BUDGET, pools)
    assert fast == slow


def test_a_demand_of_1e7_rps_clamps_to_its_pool_in_a_bounded_number_of_packings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    chat = ReplicaShape("chat", "acme", "L4", 1.0, 40.0)
    hot = math.ceil(MAX_HINT_RPS / chat.per_replica_rps)  # 250,000 replicas
    # one unit per pass packed the fleet ~250,000 times; bisection, ~log2(250,000) per rung
    # (two rungs) per fits check (two packings with pools) per clamp (three)
    most_calls = 3 * 2 * 2 * (math.ceil(math.log2(hot)) + 2)
    calls: list[int] = []
    real_pack = sizing.pack_gpus

    def counted(shapes: Sequence[ReplicaShape], counts: Sequence[int]) -> list[list[int]]:
        calls.append(sum(counts))
        assert len(calls) <= most_calls  # fail at once, not hours later
        return real_pack(shapes, counts)

    monkeypatch.setattr(sizing, "pack_gpus", counted)
    small = ReplicaShape("small", "acme", "L4", 0.5, 20.0)
    shapes = {"chat": chat, "small": small}
    pools = (PoolSpec("l4", "L4", 4, 0, 5, 0.8),)
    requests = [ModelRequest("chat", hot, idle=3, cached=2, reason="forecast_p90"),
                ModelRequest("small", 4, reason="forecast_p90")]
    trimmed = apply_gpu_budgets(requests, shapes, {"acme": 18.0}, 16.0, pools)
    # the tenant's 18 GPUs, then the pool's 20, then the cluster's 16: small keeps its two
    # GPUs' worth (4 x 0.5) while chat, holding the most, gives up everything above 14
    assert [(r.model, r.hot, r.idle, r.cached) for r in trimmed] == [
        ("chat", 14, 0, 0), ("small", 4, 0, 0)]
    assert trimmed[0].reason == CLUSTER_BUDGET
    assert trimmed[1].reason == "forecast_p90"
    assert 0 < len(calls) <= most_calls


def test_two_models_of_1e7_rps_taking_turns_clamp_in_a_bounded_number_of_trim_steps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = {m: ReplicaShape(m, "acme", "L4", 1.0, 40.0) for m in ("a", "b")}
    hot = math.ceil(MAX_HINT_RPS / 40.0)
    # the two take turns one unit at a time once level: each turn is one check, and the state
    # after any count of units is found per member, not by replaying every turn
    most_steps = 3 * 2 * hot
    steps: list[int] = []
    real_trimmed = sizing._trimmed

    def counted(counts: tuple[int, int, int], shape: ReplicaShape, rungs: Sequence[str],
                units: int) -> tuple[int, int, int]:
        steps.append(units)
        assert len(steps) <= most_steps  # fail at once
        return real_trimmed(counts, shape, rungs, units)

    monkeypatch.setattr(sizing, "_trimmed", counted)
    trimmed = apply_gpu_budgets([ModelRequest("a", hot), ModelRequest("b", hot)], shapes, {},
                                16.0)
    assert [(r.model, r.hot, r.reason) for r in trimmed] == [
        ("a", 8, CLUSTER_BUDGET), ("b", 8, CLUSTER_BUDGET)]
