"""`headroom placement bindings | release`: an operator lists the workloads bound through the
placement API (by node, with their age) and releases those a serving layer left behind; a
running placement server on the store sees the release; an id that is not bound releases
nothing; every refusal is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from clihelpers import WARM_HEADROOM, _env

from controlplane.adapters.clock import WallClock
from controlplane.placement_api import journaled_engine
from controlplane.store import Store
from controlplane.store.placement_journal import SqlPlacementJournal
from protos.headroom.v1 import placement_pb2 as pb
from scheduler.engine import PlacementEngine


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, "placement", *args, "--db", str(db)],
                          env=_env(COLUMNS="200"), capture_output=True, text=True, timeout=120)


def _bound(db: Path) -> PlacementEngine:
    """A placement server's engine on the store with w0, w1 (whole GPUs of model llama) and w2
    (a share, of model bert)."""
    engine = journaled_engine(Store.open(f"sqlite:///{db}", migrate=True), WallClock())
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(
        name=name, cpu_milli=8000, memory_mib=65_536, pool="L4",
        gpus=[pb.Gpu(index=i, product="L4", memory_mib=23_034) for i in range(2)])
        for name in ("n0", "n1")]))
    for workload, milli, model in (("w0", 1000, "llama"), ("w1", 1000, "llama"),
                                   ("w2", 250, "bert")):
        engine.place(pb.PlaceRequest(workload_id=workload, model=model, tenant="t", num_gpu=1,
                                     gpu_milli=milli, cpu_milli=100, memory_mib=128))
    return engine


def test_bindings_are_listed_by_node_with_their_gpus_and_age(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    engine = _bound(db)
    listed = _cli(db, "bindings", "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert sorted(d["workload_id"] for d in doc) == ["w0", "w1", "w2"]
    for row in doc:
        binding = engine.binding(row["workload_id"])
        assert binding is not None
        assert (row["node"], row["gpu_indices"], row["gpu_milli"], row["model"]) == (
            binding.node, list(binding.gpu_indices), binding.gpu_milli, binding.model)
    assert {d["workload_id"]: d["model"] for d in doc} == {"w0": "llama", "w1": "llama",
                                                           "w2": "bert"}
    assert {d["tenant"] for d in doc} == {"t"}
    assert [d["node"] for d in doc] == sorted(d["node"] for d in doc)
    table = _cli(db, "bindings").stdout
    assert all(w in table for w in ("w0", "w1", "w2")) and " h" in table
    header = next(line for line in table.splitlines() if "workload" in line)
    assert [c.strip() for c in header.split("┃")[1:4]] == ["workload", "node", "model"]
    rows = {r[1].strip(): r[3].strip() for r in (
        line.split("│") for line in table.splitlines() if line.startswith("│"))}
    assert rows == {"w0": "llama", "w1": "llama", "w2": "bert"}
    node = doc[0]["node"]
    only = json.loads(_cli(db, "bindings", "--node", node, "--json").stdout)
    assert {d["node"] for d in only} == {node} and len(only) == sum(
        d["node"] == node for d in doc)


def test_bindings_of_one_model_are_listed_with_model(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    _bound(db)
    llama = json.loads(_cli(db, "bindings", "--model", "llama", "--json").stdout)
    assert sorted(d["workload_id"] for d in llama) == ["w0", "w1"]
    assert {d["model"] for d in llama} == {"llama"}
    none = _cli(db, "bindings", "--model", "mistral")
    assert none.returncode == 0 and none.stdout.strip() == "no workload of model mistral is bound"


def test_on_a_narrow_terminal_the_table_folds_long_ids_whole_for_placement_release(
        tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    workload, node = "serving/llama-3-8b-chat-7d9f8c6b5-x2x9z", "gke-prod-gpu-pool-l4-a1b2c3d4"
    engine = journaled_engine(Store.open(f"sqlite:///{db}", migrate=True), WallClock())
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(
        name=node, cpu_milli=8000, memory_mib=65_536, pool="L4",
        gpus=[pb.Gpu(index=0, product="L4", memory_mib=23_034)])]))
    engine.place(pb.PlaceRequest(workload_id=workload, model="m", tenant="t", num_gpu=1,
                                 gpu_milli=1000, cpu_milli=100, memory_mib=128))
    table = subprocess.run([*WARM_HEADROOM, "placement", "bindings", "--db", str(db)],
                           env=_env(COLUMNS="80"), capture_output=True, text=True, timeout=120)
    rows = [line.split("│") for line in table.stdout.splitlines() if line.startswith("│")]
    assert "".join(r[1].strip() for r in rows) == workload  # before: "serving…"
    assert "".join(r[2].strip() for r in rows) == node      # before: "gke-pro…"


def test_a_released_binding_is_gone_for_the_running_server_too(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    engine = _bound(db)
    w0 = engine.binding("w0")
    assert w0 is not None
    done = _cli(db, "release", "w0")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"released w0 (node {w0.node}, GPUs {w0.gpu_indices[0]})\n"
    engine.refresh()  # what a server's follow job does every 0.5 s
    assert engine.binding("w0") is None
    # one GPU was left whole before; with w0's back, two whole-GPU workloads fit
    placed = [engine.place(pb.PlaceRequest(workload_id=w, model="m", tenant="t", num_gpu=1,
                                           gpu_milli=1000, cpu_milli=100, memory_mib=128))
              for w in ("w3", "w4")]
    assert (w0.node, w0.gpu_indices[0]) in {(p.binding.node, p.binding.gpu_indices[0])
                                            for p in placed}


def test_releasing_a_node_releases_every_binding_on_it(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    engine = _bound(db)
    node = json.loads(_cli(db, "bindings", "--json").stdout)[0]["node"]
    done = _cli(db, "release", "--node", node)
    assert done.returncode == 0, done.stderr
    assert json.loads(_cli(db, "bindings", "--node", node, "--json").stdout) == []
    engine.refresh()
    assert all(b.node != node for w in ("w0", "w1", "w2")
               if (b := engine.binding(w)) is not None)


def test_an_id_that_is_not_bound_releases_nothing_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    _bound(db)
    refused = _cli(db, "release", "w1", "nope")
    assert refused.returncode == 2
    assert refused.stderr == ("error: not bound: nope (see `headroom placement bindings`); "
                              "nothing released\n")
    assert len(json.loads(_cli(db, "bindings", "--json").stdout)) == 3
    nothing = _cli(db, "release")
    assert nothing.returncode == 2 and "name workloads or --node" in nothing.stderr


def test_a_missing_store_file_is_one_line_and_is_not_created(tmp_path: Path) -> None:
    db = tmp_path / "absent.db"
    refused = _cli(db, "bindings")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "no such database file" in refused.stderr and not db.exists()


def test_a_leased_binding_shows_its_time_left_and_one_that_ran_out_is_released_as_such(
        tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    hour_ago_s = WallClock().now().timestamp() - 3600
    store = Store.open(f"sqlite:///{db}", migrate=True)
    engine = PlacementEngine(journal=SqlPlacementJournal(store.engine, "test", WallClock()),
                             now_s=lambda: hour_ago_s)  # placed an hour ago
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(
        name="n0", cpu_milli=8000, memory_mib=65_536, pool="L4",
        gpus=[pb.Gpu(index=i, product="L4", memory_mib=23_034) for i in range(2)])]))
    for workload, lease_s in (("stale", 60.0), ("fresh", 7200.0)):
        engine.place(pb.PlaceRequest(workload_id=workload, num_gpu=1, cpu_milli=100,
                                     memory_mib=128, lease_s=lease_s))
    doc = {d["workload_id"]: d for d in json.loads(_cli(db, "bindings", "--json").stdout)}
    assert doc["fresh"]["lease_s"] == 7200.0
    assert doc["fresh"]["lease_expires_at"].startswith(
        datetime.fromtimestamp(hour_ago_s + 7200, UTC).isoformat()[:16])
    assert doc["fresh"]["lease_expires_at"].endswith("Z")  # before: ...+00:00
    assert doc["fresh"]["bound_at"].endswith("Z")
    lines = _cli(db, "bindings").stdout.splitlines()
    table = {w: next(line for line in lines if f" {w} " in line) for w in ("stale", "fresh")}
    assert "ran out" in table["stale"]
    assert "s left" in table["fresh"] and "ran out" not in table["fresh"]
    done = _cli(db, "release", "stale")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "released stale (node n0, GPUs 0): its lease had run out\n"
    assert [d["workload_id"] for d in json.loads(_cli(db, "bindings", "--json").stdout)] == [
        "fresh"]


def test_ids_and_names_that_look_like_rich_markup_are_listed_as_written(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    engine = journaled_engine(Store.open(f"sqlite:///{db}", migrate=True), WallClock())
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(
        name="n[/]0", cpu_milli=8000, memory_mib=65_536, pool="L4",
        gpus=[pb.Gpu(index=0, product="L4", memory_mib=23_034)])]))
    engine.place(pb.PlaceRequest(workload_id="[bold]w0[/bold]", model="a[/]b", tenant="t",
                                 num_gpu=1, gpu_milli=1000, cpu_milli=100, memory_mib=128))
    table = _cli(db, "bindings")
    assert table.returncode == 0, table.stderr  # before: MarkupError, a traceback
    rows = [[cell.strip() for cell in line.split("│")[1:4]]
            for line in table.stdout.splitlines() if line.startswith("│")]
    assert rows == [["[bold]w0[/bold]", "n[/]0", "a[/]b"]]
