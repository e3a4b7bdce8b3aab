"""Acceptance: a full plan — scale two models up, add a node through warm capacity, re-lay out an
A100-80GB from 7 x 1g.10gb to 3g.40gb + 2g.20gb + 2 x 1g.10gb, switch a node to MPS — executes
against the API test server, and every object it leaves behind is schema-valid."""

from __future__ import annotations

import yaml
from apiserver import ApiServer
from fake_controllers import FakeMigManager
from full_plan_scenario import full_plan, run_full_plan, seed_fleet
from k8s_builders import GPU_OPERATOR_NS, HEADROOM_NS, MODELS_NS
from k8s_harness import assert_schema_valid, make_backend
from relayout_scenario import TARGET, TO

from controlplane.actuation import apply_actions
from controlplane.domain.mig_relayout import RelayoutPhase
from controlplane.sim.clock import VirtualClock


def test_a_full_plan_executes_against_the_api_server_with_valid_objects(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    backend, mig = make_backend(apiserver, clock), FakeMigManager(apiserver, clock=clock)
    outcomes = run_full_plan(apiserver, clock, backend, mig)
    assert [o.ok for o in outcomes] == [True] * 5, [o.message for o in outcomes]

    def replicas_of(kind: str, name: str) -> int:
        return int(apiserver.get("apps/v1", kind, name, MODELS_NS)["spec"]["replicas"])

    assert replicas_of("Deployment", "language-m-large") == 3
    assert replicas_of("StatefulSet", "vision-resnet") == 4
    pool = apiserver.get("karpenter.sh/v1", "NodePool", "a100-80gb")
    assert pool["spec"]["limits"] == {"nodes": "3"}
    assert apiserver.get("apps/v1", "Deployment", "headroom-warm-a100-80gb", HEADROOM_NS)[
        "spec"]["replicas"] == 3
    assert backend.relayouts.relayouts_of("a100-1")[-1].phase is RelayoutPhase.DONE
    a100 = apiserver.get("v1", "Node", "a100-1")
    assert a100["metadata"]["labels"]["nvidia.com/mig.config"] == TO
    assert not a100["spec"].get("unschedulable")
    observed = backend.reader.snapshot()
    relaid = next(n for n in observed.nodes if n.name == "a100-1")
    assert sorted(relaid.gpus[0].mig_layout) == sorted(TARGET.profiles_of(0))
    l4 = next(n for n in observed.nodes if n.name == "l4-1")
    # the config Headroom selected (the device plugin applies it live), before GFD relabels
    assert {(g.sharing, g.sharing_replicas) for g in l4.gpus} == {("mps", 4)}
    assert apiserver.get("v1", "Node", "l4-1")["metadata"]["labels"][
        "nvidia.com/device-plugin.config"] == "headroom-mps-4"
    plugin = yaml.safe_load(apiserver.get("v1", "ConfigMap", "headroom-device-plugin-config",
                                          GPU_OPERATOR_NS)["data"]["headroom-mps-4"])
    assert plugin["sharing"]["mps"]["resources"][0]["replicas"] == 4
    assert mig.violations == []
    assert assert_schema_valid(apiserver) >= 15
    writes = apiserver.writes()
    assert writes and {w.field_manager for w in writes} == {"headroom"}
    assert all(w.status < 300 or w.path.endswith("/eviction") for w in writes)


def test_the_same_plan_in_dry_run_writes_nothing_and_records_the_diff(
        apiserver: ApiServer, clock: VirtualClock) -> None:
    seed_fleet(apiserver)
    backend = make_backend(apiserver, clock, dry_run=True)
    outcomes = apply_actions(full_plan(), backend.actuators)
    assert all(o.ok for o in outcomes), [o.message for o in outcomes]
    for _ in range(3):
        clock.advance(30)
        backend.mig.advance()
    assert apiserver.writes() == []
    assert backend.relayouts.active_relayouts() == ()
    planned = [w.render() for w in backend.planned_writes()]
    assert any(p.startswith("relayout Node a100-1") and TO in p for p in planned)
    assert any(p.startswith("scale StatefulSet models/vision-resnet") for p in planned)
    assert any("headroom-mps-4" in p for p in planned)
    rendered = "\n".join(a.render() for a in full_plan())
    assert "node a100-1 MIG 7 x 1g.10gb→3g.40gb + 2g.20gb + 2 x 1g.10gb" in rendered
    assert "node l4-1 sharing exclusive→mps x4 (small_trusted_models)" in rendered
