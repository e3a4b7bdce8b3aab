"""Replicas a guard keeps over their target (a scale-down held back), and those of a model held
while unplaced, run on GPUs the plan's placement does not count. The plan records them
(``Plan.kept``; plans.kept_json, migration 0024) and showback bills their GPU share to the model
out of what would otherwise be idle (then warm) on their product, never more than is billed.
A plan stored before keeps billing those GPUs as idle, as it did then."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect, update

from controlplane import cost_reader
from controlplane.domain.cost import (
    CostCategory,
    FleetSnapshot,
    GpuPrice,
    GpuUsage,
    KeptUse,
    PriceTable,
    SliceUse,
    billed_rate,
    fleet_cost_rate,
)
from controlplane.domain.guards import GuardMemory
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedPool, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.plan import KeptReplicas, Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store, downgrade, upgrade
from dashboard import costing

AT = datetime(2026, 12, 3, 23, 30, tzinfo=UTC)
H100 = GpuPrice("H100-80GB", 6.0, "test", "2026")
A100 = GpuPrice("A100-80GB", 7.0, "test", "2026")
PRICES = PriceTable((H100, A100))


def _by_model(snapshot: FleetSnapshot) -> dict[tuple[CostCategory, str], float]:
    return {(x.category, x.model): x.gpus for x in fleet_cost_rate(snapshot, PRICES)}


def test_replicas_a_guard_keeps_are_billed_to_their_model_not_as_idle() -> None:
    # 3 exclusive H100s run llama; the plan places 1 and a guard keeps the other 2
    snapshot = FleetSnapshot(AT, {"H100-80GB": 3}, {}, (
        GpuUsage("H100-80GB", (SliceUse("llama", "initech"),)),),
        (KeptUse("llama", "initech", "H100-80GB", 2.0),))
    assert _by_model(snapshot) == pytest.approx({(CostCategory.SERVING, "llama"): 3.0})


def test_kept_replicas_take_idle_gpus_then_warm_ones_and_never_more_than_is_billed() -> None:
    snapshot = FleetSnapshot(AT, {"H100-80GB": 5}, {"H100-80GB": 2}, (
        GpuUsage("H100-80GB", (SliceUse("llama", "initech"),)),),
        (KeptUse("llama", "initech", "H100-80GB", 3.0),))
    assert _by_model(snapshot) == pytest.approx({(CostCategory.SERVING, "llama"): 4.0,
                                                 (CostCategory.WARM, "__warm__"): 1.0})
    over = FleetSnapshot(AT, {"H100-80GB": 3}, {"H100-80GB": 1}, snapshot.placed,
                         (KeptUse("llama", "initech", "H100-80GB", 3.0),
                          KeptUse("qwen", "acme", "H100-80GB", 1.0)))
    lines = _by_model(over)  # 2 GPUs free for 4 kept: split in proportion
    assert lines == pytest.approx({(CostCategory.SERVING, "llama"): 2.5,
                                   (CostCategory.SERVING, "qwen"): 0.5})


def test_a_kept_mig_replica_takes_the_free_slices_of_a_placed_gpu() -> None:
    snapshot = FleetSnapshot(AT, {"A100-80GB": 1}, {}, (
        GpuUsage("A100-80GB", (SliceUse("llm", "acme", 3),)),),
        (KeptUse("llm", "acme", "A100-80GB", 3 / 7),))
    lines = {(x.category, x.model): (x.gpus, x.usd_per_hour)
             for x in fleet_cost_rate(snapshot, PRICES)}
    assert lines == {(CostCategory.SERVING, "llm"): pytest.approx((6 / 7, 6.0)),
                     (CostCategory.IDLE, "__idle__"): pytest.approx((1 / 7, 1.0))}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["A100-80GB", "H100-80GB"]),
                       st.integers(min_value=0, max_value=16)),
       st.dictionaries(st.sampled_from(["A100-80GB", "H100-80GB"]),
                       st.integers(min_value=0, max_value=4)),
       st.integers(min_value=0, max_value=8),
       st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["A100-80GB", "H100-80GB",
                                                                         "L4"]),
                          st.floats(min_value=0, max_value=12)), max_size=4))
def test_with_kept_replicas_the_lines_still_sum_to_the_bill(
        billed: dict[str, int], warm: dict[str, int], placed: int,
        kept: list[tuple[str, str, float]]) -> None:
    snapshot = FleetSnapshot(AT, billed, warm, (
        GpuUsage("H100-80GB", (SliceUse("a", "t"),), placed),) if placed else (),
        tuple(KeptUse(m, "t", p, g) for m, p, g in kept))
    lines = fleet_cost_rate(snapshot, PRICES)
    assert sum(x.usd_per_hour for x in lines) == pytest.approx(billed_rate(snapshot, PRICES))
    assert all(x.gpus >= -1e-9 for x in lines)
    for product in ("A100-80GB", "H100-80GB"):  # a plan ahead of billing is scaled to it
        assert sum(x.gpus for x in lines if x.product == product) == pytest.approx(
            billed.get(product, 0), abs=1e-9)


LLAMA = next(m for m in DEMO_MODELS if m.name == "llama-3-70b")


def _tick_keeping_two_llama_replicas(model: ModelSpec = LLAMA) -> TickReport:
    """3 H100 nodes of 1 GPU each, all billed; the plan places 1 replica of the model on one
    and a guard keeps 2 more (whole GPUs)."""
    pools = (ObservedPool("h100", "H100-80GB", 1, 3, 0, 3),)
    placement = FleetPlacement(
        revision=1, segments=(PlacedSegment(model.name, "h100-0/0", "H100-80GB", "exclusive",
                                            "", 0, 0, 10.0),),
        gpu_ids_by_product=(("H100-80GB", ("h100-0/0",)),), warm_pools=(), cost_per_hour=0.0,
        unplaced=())
    planned = Plan(AT, (), (), (KeptReplicas(model.name, 2, "H100-80GB", 1.0),))
    return TickReport(AT, AT + timedelta(seconds=1), TickStatus.APPLIED, "",
                      ObservedState(AT, pools, (), ()), (), placement, planned, (),
                      GuardMemory(()))


def _gpus_now(url: str) -> dict[tuple[str, str, str], float]:
    lines = costing.cost_now(url)
    return {(str(r.category), str(r.tenant), str(r.model)): float(r.gpus)
            for r in lines.itertuples(index=False)}


def test_a_stored_plan_bills_the_replicas_a_guard_keeps_to_the_model_and_its_tenant(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_models([LLAMA])
    store.save_tick(_tick_keeping_two_llama_replicas())
    assert _gpus_now(store_url) == pytest.approx({("serving", LLAMA.tenant, LLAMA.name): 3.0})
    store.engine.dispose()


def test_a_plan_stored_before_kept_replicas_were_recorded_bills_them_as_idle(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_models([LLAMA])
    store.save_tick(_tick_keeping_two_llama_replicas())
    with store.engine.begin() as connection:
        connection.execute(update(cost_reader.table("plans")).values(kept_json=None))
    assert _gpus_now(store_url) == pytest.approx({("serving", LLAMA.tenant, LLAMA.name): 1.0,
                                                  ("idle", "__idle__", "__idle__"): 2.0})
    store.engine.dispose()


def test_migration_0024_adds_the_kept_column_and_its_downgrade_drops_it_and_showback_still_reads(
        store_url: str) -> None:
    store = Store.open(store_url)
    upgrade(store.engine, "0023")
    assert "kept_json" not in {c["name"] for c in inspect(store.engine).get_columns("plans")}
    upgrade(store.engine)
    assert "kept_json" in {c["name"] for c in inspect(store.engine).get_columns("plans")}
    store.save_tick(_tick_keeping_two_llama_replicas())
    downgrade(store.engine, "0023")
    assert "kept_json" not in {c["name"] for c in inspect(store.engine).get_columns("plans")}
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT gpus_placed FROM plans").scalar_one() == 1
    # a store not upgraded yet still reads: its plans kept nothing known
    [tick] = cost_reader.planned_ticks(store.engine, AT, AT)
    assert tick.kept == ()
    store.engine.dispose()
