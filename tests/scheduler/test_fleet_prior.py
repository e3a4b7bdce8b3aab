"""PlanFleet's prior from the inventory: an engine without a plan of its own (a restart) keeps the
layouts the fleet's GPUs hold where they serve the demand, and only there."""

from __future__ import annotations

import pytest

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.errors import InvalidArgument
from scheduler.domain.fleet_prior import prior_from_inventory
from scheduler.domain.model import GpuSpec, HeldInstance, NodeSpec, SharingMode
from scheduler.engine import PlacementEngine

A100 = "A100-80GB"


def _held(*profiles: str, starts: tuple[int | None, ...] = (),
          models: tuple[str, ...] = ()) -> tuple[HeldInstance, ...]:
    starts = starts or (None,) * len(profiles)
    models = models or ("",) * len(profiles)
    return tuple(HeldInstance(p, s, m) for p, s, m in zip(profiles, starts, models, strict=True))


def _node(name: str, *gpus: GpuSpec) -> NodeSpec:
    return NodeSpec(name, 64_000, 512_000, gpus)


def _gpu(index: int, held: tuple[HeldInstance, ...] = (), product: str = A100,
         whole_in_use: bool = False) -> GpuSpec:
    return GpuSpec(index, product, 0, True, held, whole_in_use)


def test_a_gpus_mig_instances_become_a_prior_gpu_with_a_valid_geometry_when_starts_are_unknown(
        ) -> None:
    plan = prior_from_inventory([_node("n1", _gpu(0, _held("3g.40gb", "2g.20gb", "2g.20gb")))])
    assert [g.gpu_id for g in plan.gpus] == ["n1/0"] and plan.gpus[0].product == A100
    segments = plan.gpus[0].segments
    assert [(s.mig_profile, s.compute_slices, s.mode) for s in segments] == [
        ("3g.40gb", 3, SharingMode.MIG), ("2g.20gb", 2, SharingMode.MIG),
        ("2g.20gb", 2, SharingMode.MIG)]
    assert segments[0].mig_start == 4  # a 3g beside others sits at 4 on an A100
    assert sorted(s.mig_start for s in segments[1:]) == [0, 2]


def test_given_starts_and_models_are_kept_as_the_inventory_says() -> None:
    held = _held("3g.40gb", "4g.40gb", starts=(4, 0), models=("chat", "embed"))
    plan = prior_from_inventory([_node("n1", _gpu(2, held))])
    assert [(s.mig_profile, s.mig_start, s.model) for s in plan.gpus[0].segments] == [
        ("3g.40gb", 4, "chat"), ("4g.40gb", 0, "embed")]
    assert plan.gpus[0].gpu_id == "n1/2"


def test_a_whole_gpu_in_use_is_a_prior_whole_gpu_and_an_idle_one_is_not() -> None:
    plan = prior_from_inventory([_node("h", _gpu(0, whole_in_use=True, product="H100-80GB"),
                                       _gpu(1, product="H100-80GB"))])
    assert [g.gpu_id for g in plan.gpus] == ["h/0"]
    assert [(s.compute_slices, s.mode) for s in plan.gpus[0].segments] == [
        (0, SharingMode.EXCLUSIVE)]


def test_layouts_planfleet_could_not_keep_are_left_out_of_the_prior() -> None:
    plan = prior_from_inventory([_node(
        "n1",
        _gpu(0, _held("3g.40gb", "3g.40gb", starts=(0, 2))),  # overlapping starts
        _gpu(1, _held("1g.20gb")),  # not the standard 1g profile PlanFleet plans
        _gpu(2, _held("9g.90gb")),  # no such profile
        _gpu(3, _held("1g.10gb"), product="L4"),  # no MIG on an L4
        _gpu(4, _held("1g.10gb", "7g.80gb")),  # more slices than the GPU has
    )])
    assert plan.gpus == ()


def _request(rate_rps: float) -> pb.PlanFleetRequest:
    points = [pb.ProfilePoint(product=A100, compute_slices=g, batch_size=8, mps_processes=1,
                              throughput_rps=100.0 * g, latency_ms=10.0) for g in (1, 2, 3, 4, 7)]
    return pb.PlanFleetRequest(
        models=[pb.ModelDemand(model="a", tenant="t", isolation=pb.TRUSTED, rate_rps=rate_rps,
                               latency_slo_ms=100.0, profile=points)],
        pools=[pb.GpuPool(product=A100, max_gpus=10, price_per_gpu_hour=4.0)])


def _inventory(*profiles: str) -> pb.SyncInventoryRequest:
    return pb.SyncInventoryRequest(nodes=[pb.Node(
        name="node-7", cpu_milli=64_000, memory_mib=512_000, pool="a100",
        gpus=[pb.Gpu(index=0, product=A100, mig_capable=True,
                      mig_instances=[pb.MigInstance(profile=p) for p in profiles])])])


def _layouts(plan: pb.FleetPlan) -> list[tuple[str, tuple[str, ...]]]:
    return [(g.gpu_id, tuple(sorted(s.mig_profile for s in g.segments))) for g in plan.gpus]


def test_an_engine_without_a_plan_keeps_the_layout_its_inventory_holds() -> None:
    scratch = PlacementEngine().plan_fleet(_request(250.0))
    assert _layouts(scratch) != [("node-7/0", ("2g.20gb", "2g.20gb"))]  # what it would design
    engine = PlacementEngine()
    engine.sync_inventory(_inventory("2g.20gb", "2g.20gb"))
    plan = engine.plan_fleet(_request(250.0))
    assert _layouts(plan) == [("node-7/0", ("2g.20gb", "2g.20gb"))]
    assert sum(s.throughput_rps for s in plan.gpus[0].segments) >= 250.0


def test_a_held_layout_that_cannot_serve_the_demand_on_its_gpus_is_re_laid_out() -> None:
    engine = PlacementEngine()
    engine.sync_inventory(_inventory("1g.10gb"))  # 100 rps on a GPU: two GPUs to keep it
    plan = engine.plan_fleet(_request(250.0))
    assert len(plan.gpus) == 1 and plan.gpus[0].gpu_id == "node-7/0"  # the GPU, re-laid out
    assert _layouts(plan)[0][1] != ("1g.10gb",)
    assert sum(s.throughput_rps for s in plan.gpus[0].segments) >= 250.0


def test_a_held_layout_of_a_product_no_pool_requests_is_no_prior() -> None:
    engine = PlacementEngine()
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(
        name="h", cpu_milli=1, memory_mib=1, gpus=[pb.Gpu(
            index=0, product="H100-80GB", mig_capable=True,
            mig_instances=[pb.MigInstance(profile="2g.20gb"), pb.MigInstance(profile="2g.20gb")])
    ])]))
    plan = engine.plan_fleet(_request(250.0))
    assert [g.product for g in plan.gpus] == [A100] and not plan.gpus[0].gpu_id.startswith("h/")


def test_once_the_engine_has_a_plan_it_stays_close_to_that_plan_not_to_the_inventory() -> None:
    engine = PlacementEngine()
    first = engine.plan_fleet(_request(250.0))  # no layouts known: designed from scratch
    engine.sync_inventory(_inventory("2g.20gb", "2g.20gb"))
    second = engine.plan_fleet(_request(250.0))
    assert _layouts(second) == _layouts(first)


@pytest.mark.parametrize(("gpu", "field"), [
    (pb.Gpu(index=0, product=A100, mig_instances=[pb.MigInstance(profile=" ")]),
     "nodes[0].gpus[0].mig_instances[0].profile"),
    (pb.Gpu(index=0, product=A100, mig_instances=[pb.MigInstance(profile="1g.10gb", start=-1)]),
     "nodes[0].gpus[0].mig_instances[0].start"),
    (pb.Gpu(index=0, product=A100, whole_in_use=True,
            mig_instances=[pb.MigInstance(profile="1g.10gb")]),
     "nodes[0].gpus[0].whole_in_use"),
])
def test_a_malformed_held_layout_is_refused_naming_the_field(gpu: pb.Gpu, field: str) -> None:
    engine = PlacementEngine()
    with pytest.raises(InvalidArgument) as raised:
        engine.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(name="n", gpus=[gpu])]))
    assert raised.value.field == field
    assert engine.counts() == (0, 0, 0)  # nothing applied
