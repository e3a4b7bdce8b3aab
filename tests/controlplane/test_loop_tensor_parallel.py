"""The live loop end to end with a model whose replica spans several GPUs (tensor parallel): the
demo's llama-3-70b imported as its bf16 build on 2 H100s (the operator's `models import` of a
model the demo runs, with another profile). The loop sizes it in replicas of 2 GPUs, PlanFleet
places each on 2 whole GPUs, the pool's node target holds them and the simulated fleet runs each
on 2 GPUs of one node until they serve the demand."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from controlplane.domain.models import ProfilePoint
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store

T0 = datetime(2026, 12, 7, 9, tzinfo=UTC)
LLAMA = "llama-3-70b"
#: bf16 weights of 70B parameters are ~140 GB: 70,000 MiB on each of 2 H100s, 6 rps a replica
#: (the demo sends it ~25 rps: replicas on more GPUs than one node of 8 has)
TP2 = ProfilePoint("H100-80GB", 0, 16, 1, 6.0, 600.0, 70_000, gpus=2)


def _runtime(url: str) -> SimRuntime:
    store = Store.open(url, migrate=True)
    store.upsert_models([replace(s, profile=(TP2,)) if s.name == LLAMA else s
                         for s in DEMO_MODELS])
    settings = load_settings(db={"url": url}, sim={"history_s": 6 * 3600})
    return SimRuntime.open(settings, store, T0)


def test_a_model_of_two_gpus_a_replica_is_placed_and_served_on_two_gpus_of_one_node(
        tmp_path: Path) -> None:
    runtime = _runtime(f"sqlite:///{tmp_path / 'tp.db'}")
    runtime.advance(20 * 60)
    placement = runtime.tick().placement
    assert placement is not None
    mine = [s for s in placement.segments if s.model == LLAMA]
    replicas = placement.replicas_for(LLAMA)
    assert replicas >= 1 and len(mine) == 2 * replicas
    # every replica's two GPUs are listed together, first then second
    assert [(s.gpus, s.gpu_index) for s in mine] == [(2, 0), (2, 1)] * replicas
    observed = runtime.cluster.snapshot()
    llama, pool = observed.model(LLAMA), observed.pool("h100-80gb")
    assert llama is not None and pool is not None
    assert llama.replicas_target == llama.replicas_ready == replicas
    assert pool.target_nodes * pool.gpus_per_node >= 2 * replicas
    h100_nodes = [n for n in observed.nodes if n.pool == "h100-80gb"]
    assert sum(n.whole_gpus_in_use for n in h100_nodes) == 2 * replicas
    # no node runs half a replica: each node's GPUs in use are whole replicas' (2 each)
    assert all(n.whole_gpus_in_use % 2 == 0 for n in h100_nodes)
    assert llama.capacity_rps >= llama.demand_rps
