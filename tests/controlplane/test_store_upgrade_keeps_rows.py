"""An operator's upgrade: a store made at each older revision, holding rows in every table it
has then, migrated to head keeps every row and value (times UTC, JSON text intact) and gives
the columns added since their defaults."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Column, MetaData, Table, inspect, select
from sqlmodel import SQLModel
from tick_builders import T0

import controlplane.store.hints
import controlplane.store.placement_journal
import controlplane.store.relayout  # noqa: F401  (register their tables)
from controlplane.store import Store, as_utc, upgrade
from controlplane.store.engine import scripts

T1 = T0 + timedelta(minutes=5)
ROWS: dict[str, list[dict[str, Any]]] = {
    "models": [dict(name="bert-embed", tenant="search", isolation="trusted", engine="triton",
                    latency_slo_ms=50.0, cold_start_p50_s=20.0, cold_start_p90_s=45.0,
                    profile_json='{"L4": {"exclusive": 410.0}}', min_replicas=1,
                    max_replicas=40, paused_replicas=3, paused_at=T0, paused_by="alice")],
    "nodes": [dict(name="l4-0", pool="l4", product="L4", ready=True, cordoned=False,
                   cpu_milli=8000, memory_mib=32768, updated_at=T0)],
    "gpus": [dict(node="l4-0", index=0, product="L4", memory_mib=23034, mig_capable=False,
                  sharing="exclusive", mig_layout="")],
    "observations": [dict(id=1, model="bert-embed", at=T0, demand_rps=12.5, capacity_rps=40.0,
                          replicas_ready=1, latency_ms=42.0, queued_requests=3.0,
                          kv_cache_usage=0.625, arrivals_rps=14.0)],
    "forecasts": [dict(id=1, model="bert-embed", computed_at=T0, origin_at=T1, step_s=300,
                       p50_json="[12.0, 13.5]", p90_json="[15.0, 17.25]", method="ets",
                       fallback_reason="", backtest_wape=0.125,
                       notes_json='["2 negative value(s) clipped to 0"]')],
    "ticks": [dict(id=1, started_at=T0, finished_at=T1, status="applied", reason="",
                   gpus_ready=1, demand_rps=12.5, capacity_rps=40.0,
                   observed_json='{"at": "2026-03-02T12:00:00+00:00", "nodes": [], '
                                 '"synced": false}',
                   guard_memory_json='{"held": {}}', profiles_json=None, writer="host-1234",
                   synced=False)],
    "plans": [dict(id=1, tick_id=1, created_at=T1, revision=3, dry_run=False, cost_per_hour=0.75,
                   gpus_placed=1, warm_gpus=1, unplaced_json="[]", rendered="l4-0: bert-embed",
                   warm_gpus_json='{"L4": 1}',
                   kept_json='[{"model": "bert-embed", "tenant": "search", "product": "L4", '
                             '"replicas": 1, "gpu_share": 1.0}]')],
    "actions": [dict(id=1, plan_id=1, ordinal=0, kind="set_replicas", target="bert-embed",
                     from_value=1, to_value=2, reason="hot_headroom", skipped=False)],
    "outcomes": [dict(id=1, action_id=1, ok=True, retryable=False, message="scaled",
                      applied_at=T1)],
    "placements": [dict(id=1, plan_id=1, model="bert-embed", gpu_id="l4-0/0", product="L4",
                        mode="exclusive", mig_profile="", mig_start=0, compute_slices=0,
                        throughput_rps=40.0, tenant="search", gpus=1, gpu_index=0)],
    "gpu_prices": [dict(product="L4", price_per_gpu_hour=0.75, source="settings",
                        as_of="2026-03-02")],
    "mig_relayouts": [dict(relayout_id="a100-0-0123456789abcdef", node="a100-0", pool="a100",
                           product="A100", from_config="all-1g.5gb", to_config="all-3g.20gb",
                           to_layout_json='{"gpus": [["3g.20gb", "3g.20gb"]]}',
                           phase="draining", active=True, started_at=T0, updated_at=T1,
                           deadline_at=None, surge_nodes=1, wait_reason="", alert="",
                           reason="fragmented", was_cordoned=True)],
    "issued_forecasts": [dict(id=1, model="bert-embed", target_at=T1, step_s=300, p50_rps=12.0,
                              p90_rps=15.0, sigma=0.2, observed_rps=None, scored_at=None)],
    "leases": [dict(name="fleet", holder="host-1234", acquired_at=T0, renewed_at=T1,
                    duration_s=30, transitions=1, version=4)],
    "fleet_pause": [dict(id=1, paused_at=T1, paused_by="alice", why="incident 4711")],
    "demand_hints": [dict(id=1, model="bert-embed", rate_rps=100.0, start_at=T1,
                          end_at=T1 + timedelta(hours=2), reason="launch", created_at=T0)],
    "placement_journal": [dict(id=1, version=7, pruned_version=2, plan_version=3,
                               plan_revision=3, plan=b"\x08\x03", changed_by="host-1234",
                               changed_at=T1)],
    "placement_bindings": [dict(workload_id="edge/whisper-0", node="l4-0", gpu_indices="0",
                                mode="exclusive", mig_profile="", mig_start=0, gpu_milli=1000,
                                gpu_memory_mib=23034, cpu_milli=2000, memory_mib=8192,
                                reason="placed", version=7, released_version=None, bound_at=T1,
                                lease_s=30.0, lease_expires_at_s=1772452830.0,
                                model="whisper", tenant="edge", gpu_products='["l4"]',
                                gpu_memory_request_mib=20000)],
}
#: what a column added by a later migration holds in a row written before it
ADDED = {("placement_bindings", "lease_s"): 0.0,  # 0009: no lease, never expires
         ("placement_bindings", "lease_expires_at_s"): 0.0,
         ("placement_bindings", "model"): "",  # 0014: not known
         ("placement_bindings", "tenant"): "",
         ("mig_relayouts", "was_cordoned"): False,  # 0015: Headroom's own cordon
         ("ticks", "writer"): None,  # 0016: not known
         ("plans", "warm_gpus_json"): None,  # 0020: only the total (warm_gpus) known
         ("placement_bindings", "gpu_products"): "[]",  # 0021: any product, no memory stated
         ("placement_bindings", "gpu_memory_request_mib"): 0,
         ("models", "min_replicas"): None,  # 0022: no bound, not paused
         ("models", "max_replicas"): None,
         ("models", "paused_replicas"): None,
         ("models", "paused_at"): None,
         ("models", "paused_by"): None,
         ("forecasts", "notes_json"): None,  # 0023: nothing noted
         ("plans", "kept_json"): None,  # 0024: no kept replicas known
         ("ticks", "synced"): False,  # 0026: its snapshot's flag
         ("observations", "queued_requests"): None,  # 0027: not measured
         ("observations", "kv_cache_usage"): None,
         ("placements", "gpus"): 1,  # 0028: a replica of one GPU
         ("placements", "gpu_index"): 0,
         ("observations", "arrivals_rps"): None}  # 0030: as many as finished
RENAMED_BY_0006 = {("observations", "latency_ms"): "mean_latency_ms"}  # 0005 named it so


def write_at_revision(store: Store, revision: str) -> dict[str, set[str]]:
    """Each table of ``revision`` its rows, with the columns it has then; those columns."""
    present: dict[str, set[str]] = {}
    schema = inspect(store.engine)
    with store.engine.begin() as connection:
        if schema.has_table("placement_journal"):  # 0008 writes its one row
            connection.exec_driver_sql("DELETE FROM placement_journal")
        for head in SQLModel.metadata.sorted_tables:
            if head.name not in ROWS or not schema.has_table(head.name):
                continue
            there = {c["name"] for c in schema.get_columns(head.name)}
            named = {c.name: (RENAMED_BY_0006.get((head.name, c.name), c.name)
                              if revision == "0005" else c.name) for c in head.columns}
            kept = [c for c in head.columns if named[c.name] in there]
            table = Table(head.name, MetaData(), *[Column(named[c.name], c.type) for c in kept])
            connection.execute(table.insert(), [{named[c.name]: row[c.name] for c in kept}
                                                for row in ROWS[head.name]])
            present[head.name] = {c.name for c in kept}
    return present


def older_revisions() -> list[str]:
    return [s.revision for s in scripts().walk_revisions()][::-1][:-1]


@pytest.mark.parametrize("revision", older_revisions())
def test_a_store_made_at_an_older_revision_keeps_every_row_through_the_upgrade_to_head(
        store_url: str, revision: str) -> None:
    store = Store.open(store_url)
    upgrade(store.engine, revision)
    present = write_at_revision(store, revision)
    upgrade(store.engine)
    with store.engine.connect() as connection:
        for name, columns in present.items():
            [row] = [dict(r._mapping) for r in connection.execute(
                select(SQLModel.metadata.tables[name]))]
            got = {k: as_utc(v) if isinstance(v, datetime) else v for k, v in row.items()}
            want = {k: v if k in columns else ADDED.get((name, k)) for k, v in
                    ROWS[name][0].items()}
            assert got == want, name
    store.engine.dispose()
