"""Property (hypothesis): a lease that runs out is exactly a Release at that moment. An engine
with leases and one without, to which the same Places go and which is sent a Release for each
lease the moment it runs out, hold the same bindings after every step."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_builders import make_node, make_place

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import Infeasible
from scheduler.engine import PlacementEngine

T0_S = 1_800_000_000.0


@dataclass(frozen=True)
class Step:
    kind: str  # place | renew | advance
    lease_s: float = 0.0  # place
    gpu_milli: int = 1000  # place, with one GPU
    num_gpu: int = 1  # place
    target: int = 0  # renew: the workload w<target>
    advance_s: float = 0.0  # advance


steps_st = st.lists(st.one_of(
    st.builds(Step, st.just("place"), lease_s=st.sampled_from([0.0, 10.0, 30.0]),
              gpu_milli=st.sampled_from([250, 500, 1000]), num_gpu=st.integers(1, 2)),
    st.builds(Step, st.just("renew"), target=st.integers(0, 30)),
    st.builds(Step, st.just("advance"), advance_s=st.floats(1, 25)),
), min_size=1, max_size=40)


def _held(engine: PlacementEngine) -> list[tuple[str, str, tuple[int, ...], int]]:
    return [(b.workload_id, b.node, tuple(b.gpu_indices), b.gpu_milli)
            for b in engine.list_bindings(pb.ListBindingsRequest()).bindings]


def _place(engine: PlacementEngine, request: pb.PlaceRequest) -> str | None:
    """The node bound to, or None when refused."""
    try:
        return engine.place(request).binding.node
    except Infeasible:
        return None


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps_st)
def test_a_lease_running_out_frees_exactly_what_a_release_then_would(steps: list[Step]) -> None:
    now_s = [T0_S]
    leased = PlacementEngine(now_s=lambda: now_s[0])
    plain = PlacementEngine(now_s=lambda: now_s[0])
    nodes = pb.SyncInventoryRequest(nodes=[make_node("n0", gpus=2), make_node("n1", gpus=1)])
    for engine in (leased, plain):
        engine.sync_inventory(nodes)
    expires_at_s: dict[str, float] = {}  # the model: bound with a lease, in the order placed
    for k, step in enumerate(steps):
        now_s[0] += step.advance_s
        for workload_id, at_s in list(expires_at_s.items()):
            if at_s <= now_s[0]:
                plain.release(pb.ReleaseRequest(workload_id=workload_id))
                del expires_at_s[workload_id]
        if step.kind == "place":
            request = make_place(f"w{k}", num_gpu=step.num_gpu,
                                 gpu_milli=step.gpu_milli if step.num_gpu == 1 else 0)
            node = _place(plain, request)
            request.lease_s = step.lease_s
            assert _place(leased, request) == node
            if node is not None and step.lease_s > 0:
                expires_at_s[request.workload_id] = now_s[0] + step.lease_s
        elif step.kind == "renew":
            workload_id = f"w{step.target}"
            answer = leased.renew_leases(pb.RenewLeasesRequest(workload_ids=[workload_id]))
            if workload_id in expires_at_s:
                expires_at_s[workload_id] = answer.renewed[0].lease_expires_at_s
                assert expires_at_s[workload_id] == now_s[0] + 10 or (
                    expires_at_s[workload_id] == now_s[0] + 30)
            else:
                assert all(b.lease_expires_at_s == 0 for b in answer.renewed)
        assert _held(leased) == _held(plain)
