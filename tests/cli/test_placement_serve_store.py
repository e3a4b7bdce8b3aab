"""`headroom placement serve --db`: the placement state outlives the process. Over real gRPC on
loopback, a restarted server still knows where every workload runs (its GPUs stay taken) and
continues its plan revisions; two servers on one store bind each GPU once and stream each
other's plans; the store's DemandHints service is served beside Placement."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from errno import EADDRINUSE
from pathlib import Path

import grpc
import pytest
from clihelpers import HEADROOM, WARM_HEADROOM, _env

from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.placement_journal import placement_status
from protos.headroom.v1 import hints_pb2, hints_pb2_grpc
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc

A100 = "A100-80GB"
INVENTORY = pb.SyncInventoryRequest(nodes=[pb.Node(
    name="gpu-node-0", cpu_milli=32_000, memory_mib=131_072, pool=A100,
    gpus=[pb.Gpu(index=i, product=A100, memory_mib=81_920, mig_capable=True)
          for i in range(2)])])
PLAN = pb.PlanFleetRequest(
    models=[pb.ModelDemand(model="llama", tenant="t", isolation=pb.TRUSTED, rate_rps=150.0,
                           latency_slo_ms=100.0, profile=[pb.ProfilePoint(
                               product=A100, compute_slices=g, batch_size=8, mps_processes=1,
                               throughput_rps=100.0 * g, latency_ms=10.0) for g in (1, 2, 7)])],
    pools=[pb.GpuPool(product=A100, max_gpus=4, price_per_gpu_hour=4.0)])

#: how the line saying what a server restored ends: the store does not keep the inventory
WAITS = (" restored; placing and ranking wait for the first SyncInventory (the inventory is "
         "not kept)")


def _whole(workload_id: str) -> pb.PlaceRequest:
    return pb.PlaceRequest(workload_id=workload_id, model="llama", tenant="t", cpu_milli=1000,
                           memory_mib=1024, num_gpu=1, gpu_milli=1000)


@contextmanager
def _server(db: Path, **env: str) -> Iterator[tuple[subprocess.Popen[str], grpc.Channel, str]]:
    """``headroom placement serve --db DB`` on a free port: the process, a channel to it and
    the line saying what it restored; killed at the end if the test did not stop it."""
    proc = subprocess.Popen([*HEADROOM, "placement", "serve", "--listen", "127.0.0.1:0", "--db",
                             str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(**env))
    try:
        assert proc.stdout is not None
        listening = proc.stdout.readline().strip()
        assert listening.startswith("placement API listening on 127.0.0.1:"), listening
        restored = proc.stdout.readline().strip()
        with grpc.insecure_channel(listening.rsplit(" ", 1)[-1]) as channel:
            yield proc, channel, restored
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "placement API stopped" in out


def test_a_restarted_server_keeps_its_bindings_and_plan_revisions(tmp_path: Path) -> None:
    db = tmp_path / "placement.db"
    with _server(db) as (proc, channel, restored):
        assert restored == (f"placement state kept in sqlite:///{db}: 0 binding(s) and plan "
                            f"revision 0{WAITS}")
        stub = pb_grpc.PlacementStub(channel)
        stub.SyncInventory(INVENTORY, timeout=10)
        first = stub.Place(_whole("llama-0"), timeout=10).binding
        planned = stub.PlanFleet(PLAN, timeout=60)
        assert planned.revision == 1
        _stop(proc)

    with _server(db) as (proc, channel, restored):
        assert restored.endswith(f": 1 binding(s) and plan revision 1{WAITS}")
        stub = pb_grpc.PlacementStub(channel)
        assert stub.GetPlan(pb.GetPlanRequest(), timeout=10) == planned
        with pytest.raises(grpc.RpcError) as err:
            stub.Place(_whole("llama-0"), timeout=10)
        assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
        stub.SyncInventory(INVENTORY, timeout=10)
        second = stub.Place(_whole("llama-1"), timeout=10).binding
        assert second.node == first.node and set(second.gpu_indices).isdisjoint(first.gpu_indices)
        with pytest.raises(grpc.RpcError) as err:
            stub.Place(_whole("llama-2"), timeout=10)  # both GPUs are taken, one since before
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        watch = stub.WatchPlan(pb.WatchPlanRequest(after_revision=planned.revision), timeout=60)
        assert stub.PlanFleet(PLAN, timeout=60).revision == 2
        assert next(watch).revision == 2
        watch.cancel()
        _stop(proc)


def test_a_restarted_server_says_placing_and_ranking_wait_for_its_first_inventory_and_they_do(
        tmp_path: Path) -> None:
    db = tmp_path / "placement.db"
    with _server(db) as (proc, channel, _):
        stub = pb_grpc.PlacementStub(channel)
        stub.SyncInventory(INVENTORY, timeout=10)
        stub.Place(_whole("llama-0"), timeout=10)
        _stop(proc)

    with _server(db) as (proc, channel, restored):
        assert restored.endswith(": 1 binding(s) and plan revision 0 restored; placing and "
                                 "ranking wait for the first SyncInventory (the inventory is "
                                 "not kept)"), restored
        stub = pb_grpc.PlacementStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.Place(_whole("llama-1"), timeout=10)
        assert (err.value.code(), err.value.details()) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "no_inventory: the inventory has no node (SyncInventory first)")
        ask = pb.RankReplicasRequest(replicas=[pb.ReplicaLoad(workload_id="llama-0")])
        waiting = stub.RankReplicas(ask, timeout=10).ranked[0]
        assert not waiting.can_serve
        assert waiting.reason.startswith("node_unavailable: gpu-node-0 is not in the inventory "
                                         "(no SyncInventory since this server started)")
        stub.SyncInventory(INVENTORY, timeout=10)
        assert stub.RankReplicas(ask, timeout=10).ranked[0].can_serve
        assert stub.Place(_whole("llama-1"), timeout=10).binding.node == "gpu-node-0"
        _stop(proc)


def test_a_server_restarted_after_a_lease_ran_out_neither_restores_nor_ranks_that_binding(
        tmp_path: Path) -> None:
    db = tmp_path / "placement.db"
    with _server(db) as (proc, channel, _):
        stub = pb_grpc.PlacementStub(channel)
        stub.SyncInventory(INVENTORY, timeout=10)
        leased = _whole("router-replica-0")
        leased.lease_s = 1.0
        stub.Place(leased, timeout=10)
        stub.Place(_whole("kept"), timeout=10)
        _stop(proc)
    time.sleep(1.2)  # the router died too: nobody renewed it

    with _server(db) as (proc, channel, restored):
        assert restored.endswith(f": 1 binding(s) and plan revision 0{WAITS}")
        stub = pb_grpc.PlacementStub(channel)
        stub.SyncInventory(INVENTORY, timeout=10)
        answer = stub.RankReplicas(pb.RankReplicasRequest(replicas=[
            pb.ReplicaLoad(workload_id="router-replica-0"), pb.ReplicaLoad(workload_id="kept")]),
            timeout=10)
        assert [r.workload_id for r in answer.ranked] == ["kept"]
        assert list(answer.unknown) == ["router-replica-0"]
        _stop(proc)


def test_two_servers_on_one_store_bind_each_gpu_once_and_stream_each_other_s_plans(
        tmp_path: Path) -> None:
    db = tmp_path / "placement.db"
    with _server(db) as (one, one_channel, _), _server(db) as (two, two_channel, _):
        first, second = pb_grpc.PlacementStub(one_channel), pb_grpc.PlacementStub(two_channel)
        for stub in (first, second):
            stub.SyncInventory(INVENTORY, timeout=10)
        a = first.Place(_whole("llama-0"), timeout=10).binding
        b = second.Place(_whole("llama-1"), timeout=10).binding
        assert set(a.gpu_indices).isdisjoint(b.gpu_indices)
        for stub, workload, code in ((first, "llama-2", grpc.StatusCode.RESOURCE_EXHAUSTED),
                                     (second, "llama-0", grpc.StatusCode.ALREADY_EXISTS)):
            with pytest.raises(grpc.RpcError) as err:
                stub.Place(_whole(workload), timeout=10)
            assert err.value.code() == code
        for stub in (first, second):  # each server lists the other's bindings too
            assert [b.workload_id for b in stub.ListBindings(
                pb.ListBindingsRequest(), timeout=10).bindings] == ["llama-0", "llama-1"]
        second.Release(pb.ReleaseRequest(workload_id="llama-0"), timeout=10)
        assert first.Place(_whole("llama-2"), timeout=10).binding.gpu_indices == a.gpu_indices
        watch = second.WatchPlan(pb.WatchPlanRequest(after_revision=0), timeout=60)
        planned = first.PlanFleet(PLAN, timeout=60)
        assert next(watch) == planned  # made by the other server, streamed by this one
        watch.cancel()
        _stop(two)
        _stop(one)


def test_the_store_s_demand_hints_are_served_beside_placement(tmp_path: Path) -> None:
    db = tmp_path / "placement.db"
    Store.open(f"sqlite:///{db}", migrate=True).upsert_models(DEMO_MODELS)
    with _server(db) as (proc, channel, _):
        hints = hints_pb2_grpc.DemandHintsStub(channel)
        added = hints.AddHint(hints_pb2.AddHintRequest(
            model=DEMO_MODELS[0].name, rate_rps=600.0, end_unix_s=4_102_444_800.0), timeout=10)
        listed = hints.ListHints(hints_pb2.ListHintsRequest(), timeout=10).hints
        assert [h.id for h in listed] == [added.id]
        _stop(proc)


def test_the_journal_names_the_server_by_its_k8s_identity_when_one_is_set(
        tmp_path: Path) -> None:
    db = tmp_path / "placement.db"
    with _server(db, HEADROOM_K8S__IDENTITY="placement-7c9d-0") as (proc, channel, _):
        stub = pb_grpc.PlacementStub(channel)
        stub.SyncInventory(INVENTORY, timeout=10)
        stub.Place(_whole("llama-0"), timeout=10)
        _stop(proc)
    store = Store.open(f"sqlite:///{db}")
    with store.engine.connect() as connection:
        placement = placement_status(connection)
    store.engine.dispose()
    assert placement is not None and placement.changed_by == "placement-7c9d-0"


def test_a_hint_over_its_pools_is_logged_with_its_model_and_warning_not_a_bare_event_name(
        tmp_path: Path) -> None:
    db = tmp_path / "placement.db"
    Store.open(f"sqlite:///{db}", migrate=True).upsert_models(DEMO_MODELS)
    config = tmp_path / "headroom.yaml"
    config.write_text(f"db: {{url: 'sqlite:///{db}'}}\npools:\n"
                      "  - {name: a100-80gb, product: A100-80GB, gpus_per_node: 8, max_nodes: 1,"
                      " price_per_gpu_hour: 5.12}\n")
    proc = subprocess.Popen([*HEADROOM, "placement", "serve", "--listen", "127.0.0.1:0",
                             "--config", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert proc.stdout is not None
        listening = proc.stdout.readline().strip()
        with grpc.insecure_channel(listening.rsplit(" ", 1)[-1]) as channel:
            added = hints_pb2_grpc.DemandHintsStub(channel).AddHint(hints_pb2.AddHintRequest(
                model="llama-3-8b-chat", rate_rps=20_000.0, end_unix_s=4_102_444_800.0),
                timeout=10)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert added.capacity_warning
    events = [json.loads(line) for line in err.splitlines() if "hint.over_capacity" in line]
    assert len(events) == 1, err
    assert events[0]["level"] == "warning" and events[0]["model"] == "llama-3-8b-chat"
    assert events[0]["hint_id"] == added.id and events[0]["error"] == added.capacity_warning


def _config_env() -> dict[str, str]:
    """The test environment without the placement address ``_env`` sets: the config's rules."""
    env = _env()
    env.pop("HEADROOM_PLACEMENT__LISTEN")
    return env


def test_placement_serve_listens_and_serves_metrics_where_its_config_says_options_beating_it(
        tmp_path: Path) -> None:
    config = tmp_path / "ps.yaml"
    config.write_text(f"db: {{url: 'sqlite:///{tmp_path / 'ps.db'}'}}\n"
                      "placement: {listen: '127.0.0.1:0', metrics_listen: '127.0.0.1:0'}\n")
    for options in ([], ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]):
        proc = subprocess.Popen([*HEADROOM, "placement", "serve", "--config", str(config),
                                 *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=_config_env())
        try:
            assert proc.stdout is not None
            listening = proc.stdout.readline().strip()
            assert listening.startswith("placement API listening on 127.0.0.1:"), listening
            assert not listening.endswith(":50051")
            assert proc.stdout.readline().startswith("placement state kept in ")
            metrics = proc.stdout.readline().strip()
            assert metrics.startswith("metrics on http://127.0.0.1:"), metrics
            with urllib.request.urlopen(metrics.rsplit(" ", 1)[-1], timeout=10) as response:
                assert "headroom_placement_bindings 0.0" in response.read().decode()
            _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize(("setting", "message"), [
    ("listen", "placement.listen '127.0.0.1:{port}': port {port} is taken (Address already in "
               "use)"),
    ("metrics_listen", "placement.metrics_listen 127.0.0.1:{port}: cannot serve metrics there: "
                       "[Errno {errno}] Address already in use"),
], ids=["listen", "metrics_listen"])
def test_a_taken_port_of_the_config_is_named_as_the_setting_in_its_file(
        tmp_path: Path, setting: str, message: str) -> None:
    config = tmp_path / "ps.yaml"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        addresses = {"listen": "127.0.0.1:0", setting: f"127.0.0.1:{port}"}
        config.write_text(f"db: {{url: 'sqlite:///{tmp_path / 'ps.db'}'}}\nplacement: "
                          f"{json.dumps(addresses)}\n")
        run = subprocess.run([*WARM_HEADROOM, "placement", "serve", "--config", str(config)],
                             capture_output=True, text=True, timeout=120, env=_config_env())
    assert run.returncode == 2, run.stdout
    assert run.stderr == f"error: {config}: {message.format(port=port, errno=EADDRINUSE)}\n"
