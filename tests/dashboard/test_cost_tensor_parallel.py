"""Showback of replicas of several GPUs (tensor parallel): a replica of N GPUs is a placed
segment on each of its N GPUs, so a stored plan bills all N to its model, and one a guard keeps
over its target is billed its N GPUs too (``KeptReplicas`` at a GPU share of N)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controlplane.domain.guards import GuardMemory
from controlplane.domain.observed import ObservedPool, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.plan import KeptReplicas, Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from dashboard import costing

AT = datetime(2026, 12, 3, 23, 30, tzinfo=UTC)
H100 = "H100-80GB"
LLAMA = next(m for m in DEMO_MODELS if m.name == "llama-3-70b")


def _replica_of_four(first_gpu: int) -> tuple[PlacedSegment, ...]:
    return tuple(PlacedSegment(LLAMA.name, f"{H100}/{first_gpu + i}", H100, "exclusive", "", 0,
                               0, 12.0 / 4, gpus=4, gpu_index=i) for i in range(4))


def _tick(nodes_of_4: int, kept: tuple[KeptReplicas, ...] = ()) -> TickReport:
    """2 replicas of 4 H100s placed on nodes of 4 GPUs, all billed, and ``kept`` beyond them."""
    segments = (*_replica_of_four(0), *_replica_of_four(4))
    placement = FleetPlacement(
        revision=1, segments=segments,
        gpu_ids_by_product=((H100, tuple(s.gpu_id for s in segments)),), warm_pools=(),
        cost_per_hour=0.0, unplaced=())
    pools = (ObservedPool("h100", H100, 4, nodes_of_4, 0, nodes_of_4),)
    return TickReport(AT, AT + timedelta(seconds=1), TickStatus.APPLIED, "",
                      ObservedState(AT, pools, (), ()), (), placement,
                      Plan(AT, (), (), kept), (), GuardMemory(()))


def _gpus_now(url: str) -> dict[tuple[str, str], float]:
    return {(str(r.category), str(r.model)): float(r.gpus)
            for r in costing.cost_now(url).itertuples(index=False)}


def test_a_stored_plan_bills_every_gpu_of_a_replica_of_four_to_its_model(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_models([LLAMA])
    store.save_tick(_tick(nodes_of_4=3))
    assert _gpus_now(store_url) == pytest.approx({("serving", LLAMA.name): 8.0,
                                                  ("idle", "__idle__"): 4.0})
    store.engine.dispose()


def test_a_replica_of_four_gpus_a_guard_keeps_is_billed_its_four_gpus(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_models([LLAMA])
    store.save_tick(_tick(nodes_of_4=3, kept=(KeptReplicas(LLAMA.name, 1, H100, 4.0),)))
    assert _gpus_now(store_url) == pytest.approx({("serving", LLAMA.name): 12.0})
    store.engine.dispose()
