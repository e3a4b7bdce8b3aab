"""``headroom status`` shows a plan's $/h as the price of exactly the GPUs it counts (placed,
warm and those of the replicas it keeps beyond its placement), and beside the pools what the
fleet bills (ready and provisioning nodes' GPUs)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from clihelpers import headroom_status, status_json
from sqlmodel import Session, col, select

from controlplane.adapters.clock import WallClock
from controlplane.cli.status_view import bill_text
from controlplane.domain.desired import PoolSpec
from controlplane.domain.fleet_status import PoolStatus, fleet_bill
from controlplane.domain.guards import GuardMemory
from controlplane.domain.observed import ObservedPool, ObservedState
from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.domain.plan import KeptReplicas, Plan
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.tables import PlacementRecord, PlanRecord


def test_the_plans_cost_is_its_placed_and_warm_gpus_and_the_pools_show_the_fleets_bill(
        sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    settings = load_settings(db={"url": sqlite_url}, sim={"history_s": 6 * 3600})
    SimRuntime.open(settings, store, WallClock().now() - timedelta(minutes=3)).advance(3 * 60)
    doc = status_json(sqlite_url)
    plan = doc["plan"]
    price = {p["product"]: p["price_per_gpu_hour"] for p in doc["pools"]}
    with Session(store.engine) as session:
        gpus = set(session.exec(select(PlacementRecord.gpu_id, PlacementRecord.product)
                                .where(col(PlacementRecord.plan_id) == plan["id"])).all())
        warm_json = session.exec(select(PlanRecord.warm_gpus_json)
                                 .where(col(PlanRecord.id) == plan["id"])).one()
    warm: dict[str, int] = json.loads(warm_json or "{}")
    assert len(gpus) == plan["gpus_placed"] and sum(warm.values()) == plan["warm_gpus"]
    # and the GPUs of replicas a guard keeps beyond the placement (some starts of the demo's
    # traffic have a scale-down held at the tick read)
    counted = sum(price[product] for _, product in gpus) + sum(
        price[product] * n for product, n in warm.items()) + sum(
        price[k["product"]] * k["gpus"] for k in plan["kept"])
    assert plan["cost_per_hour"] == pytest.approx(counted, abs=1e-6)
    billed = [(p["nodes_ready"] + p["nodes_pending"]) * p["gpus_per_node"] for p in doc["pools"]]
    bill = sum(n * p["price_per_gpu_hour"] for n, p in zip(billed, doc["pools"], strict=True))
    assert doc["billed"] == {"gpus": sum(billed), "cost_per_hour": pytest.approx(bill),
                             "unpriced_pools": []}
    table = " ".join(headroom_status(sqlite_url).stdout.split())  # a title wraps at its width
    kept_gpus = sum(k["gpus"] for k in plan["kept"])
    kept = f" + {kept_gpus:,.4g} kept beyond the placement" if plan["kept"] else ""
    assert (f"{plan['gpus_placed']} GPUs placed + {plan['warm_gpus']} warm{kept} = "
            f"${plan['cost_per_hour']:,.2f}/h") in table
    assert f"Pools (billed: {sum(billed)} GPUs, ${bill:,.2f}/h)" in table


def test_the_fleets_bill_names_the_pools_billing_gpus_without_a_price() -> None:
    pools = (PoolStatus(ObservedPool("a100", "A100-80GB", 8, 1, 1, 2), 5.12, "configured"),
             PoolStatus(ObservedPool("l4", "L4", 4, 2, 0, 2), None, ""),
             PoolStatus(ObservedPool("h100", "H100-80GB", 8, 0, 0, 0), None, ""))
    bill = fleet_bill(pools)
    assert (bill.gpus, bill.usd_per_hour, bill.unpriced) == (24, 81.92, ("l4",))
    assert bill_text(bill) == "billed: 24 GPUs, $81.92/h; no price for pool(s) l4"


def test_the_plans_cost_counts_the_replicas_a_guard_keeps_beyond_its_placement(
        sqlite_url: str) -> None:
    at = WallClock().now()
    store = Store.open(sqlite_url, migrate=True)
    store.upsert_prices([PoolSpec("h100", "H100-80GB", 1, 0, 3, 6.0)], at)
    placement = FleetPlacement(
        revision=1, segments=(PlacedSegment("llama", "h100-0/0", "H100-80GB", "exclusive", "",
                                            0, 0, 10.0),),
        gpu_ids_by_product=(("H100-80GB", ("h100-0/0",)),), warm_pools=(), cost_per_hour=6.0,
        unplaced=())
    observed = ObservedState(at, (ObservedPool("h100", "H100-80GB", 1, 3, 0, 3),), (), ())
    store.save_tick(TickReport(at, at, TickStatus.APPLIED, "", observed, (), placement,
                               Plan(at, (), (), (KeptReplicas("llama", 2, "H100-80GB", 1.0),)),
                               (), GuardMemory(())))
    plan = status_json(sqlite_url)["plan"]
    assert plan["cost_per_hour"] == pytest.approx(18.0)  # 1 placed + 2 kept H100s at $6
    assert plan["kept"] == [{"model": "llama", "replicas": 2, "product": "H100-80GB",
                             "gpus": 2.0}]
    table = " ".join(headroom_status(sqlite_url).stdout.split())
    assert "1 GPUs placed + 0 warm + 2 kept beyond the placement = $18.00/h" in table


def test_status_with_a_config_pricing_a_pool_otherwise_notes_the_store_price_is_used(
        sqlite_url: str, tmp_path: Path) -> None:
    store = Store.open(sqlite_url, migrate=True)
    store.upsert_prices([PoolSpec("h100", "H100-80GB", 1, 0, 3, 6.0)], WallClock().now())
    config = tmp_path / "headroom.yaml"
    config.write_text("pools:\n  - {name: h100, product: H100-80GB, gpus_per_node: 1, "
                      "max_nodes: 3, price_per_gpu_hour: 7.5}\n", encoding="utf-8")
    run = headroom_status(sqlite_url, "--config", str(config), "--json")
    assert ("note: --config prices pool h100 (H100-80GB) at $7.5/GPU-h, the store's price in "
            "force is $6 (settings pools[h100].price_per_gpu_hour): the store's is used") \
        in run.stderr
    assert "note: --config" not in headroom_status(sqlite_url, "--json").stderr
