"""The reconcile loop lays nodes out as the fleet plan needs: real core, in-process placement,
the simulated fleet (which binds a MIG replica only to an instance of its size), SQLite."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from controlplane.domain.actions import ActionOutcome, ApplySharing, RelayoutMig
from controlplane.domain.mig_relayout import RelayoutPhase
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.reconcile import reconcile_once
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.relayout import SqlRelayoutStore

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
MIG_MODELS = ("llama-3-8b-chat", "mistral-7b-support", "resnet50-vision")  # A100 MIG slices


def _runtime(url: str, *, dry_run: bool = False, start_warm: bool = False,
             node_configs: bool = True) -> tuple[SimRuntime, list[TickReport]]:
    # replicas serve what their profiles say: a fleet taken over is sized right at once
    settings = load_settings(db={"url": url}, safety={"dry_run": dry_run},
                             sim={"history_s": 6 * 3600, "start_warm": start_warm,
                                  "true_throughput_factor": {}},
                             reconcile={"node_configs": node_configs})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), T0)
    reports: list[TickReport] = []
    runtime.on_tick = lambda report, _saved: reports.append(report)
    return runtime, reports


def _mig_layouts(runtime: SimRuntime) -> list[tuple[tuple[str, ...], ...]]:
    return [tuple(g.mig_layout for g in n.gpus) for n in runtime.cluster.snapshot().nodes
            if n.product == "A100-80GB" and n.ready]


def _relayouts(reports: list[TickReport]) -> list[tuple[RelayoutMig, ActionOutcome | None]]:
    out: list[tuple[RelayoutMig, ActionOutcome | None]] = []
    for report in reports:
        outcomes = {o.target: o for o in report.outcomes}
        out.extend((a, outcomes.get(a.target)) for a in (report.plan.actions if report.plan
                                                          else ()) if isinstance(a, RelayoutMig))
    return out


def test_new_a100_nodes_are_laid_out_by_the_loop_and_then_serve_the_mig_models(
        sqlite_url: str) -> None:
    runtime, reports = _runtime(sqlite_url)
    runtime.advance(15 * 60)  # from empty pools: nodes come up with MIG off
    relayouts = _relayouts(reports)
    assert relayouts and all(o is not None and o.ok for _, o in relayouts)
    assert runtime.cluster.relayouts_started == len({a.node for a, _ in relayouts})
    layouts = _mig_layouts(runtime)
    assert layouts and all(all(gpu) for node in layouts for gpu in node)
    snapshot = runtime.cluster.snapshot()
    for model in MIG_MODELS:
        seen = snapshot.model(model)
        assert seen is not None and seen.replicas_ready > 0, model
    assert not any(isinstance(a, ApplySharing) for r in reports if r.plan
                   for a in r.plan.actions)  # the demo's whole GPUs stay exclusive


def test_the_loops_re_layouts_are_recorded_in_the_stores_relayout_table_as_on_kubernetes(
        sqlite_url: str) -> None:
    # headroom status and the dashboard's Fleet page read that table
    runtime, reports = _runtime(sqlite_url)
    runtime.advance(15 * 60)
    reasons = {a.node: a.reason for a, o in _relayouts(reports) if o is not None and o.ok}
    assert reasons
    stored = SqlRelayoutStore(runtime.store.engine)
    for node, reason in reasons.items():
        (relayout,) = stored.relayouts_of(node)
        assert relayout.reason == reason
        assert relayout.phase is RelayoutPhase.DONE or relayout.is_active
    assert {r.node for r in stored.active_relayouts()} == set(runtime.cluster.in_flight())


def test_a_fleet_taken_over_is_already_laid_out_and_needs_no_relayout(sqlite_url: str) -> None:
    runtime, reports = _runtime(sqlite_url, start_warm=True)
    runtime.start()
    assert reports and _relayouts(reports) == []
    observed = runtime.store.last_observed()
    assert observed is not None
    a100 = [n for n in observed.nodes if n.product == "A100-80GB"]
    assert a100 and all(g.mig_layout for n in a100 for g in n.gpus)
    assert all(m.capacity_rps >= m.demand_rps for m in observed.models)


def test_a_dry_run_plans_the_relayout_and_leaves_the_node_as_it_is(sqlite_url: str) -> None:
    runtime, _ = _runtime(sqlite_url, dry_run=True)
    assert runtime.cluster.set_size("a100-80gb", 1).ok
    runtime.advance(300, run_jobs=False)  # the node is up, with MIG off
    report = runtime.tick()
    assert report.status is TickStatus.DRY_RUN and report.plan is not None
    planned = [a for a in report.plan.actions if isinstance(a, RelayoutMig)]
    assert [a.node for a in planned] == ["a100-80gb-0001"] and not report.outcomes
    assert planned[0].to_layout.is_mig_enabled()
    assert _mig_layouts(runtime) == [((),) * 8]
    assert runtime.cluster.in_flight() == {}


def test_with_node_configs_off_the_loop_plans_no_node_change(sqlite_url: str) -> None:
    runtime, reports = _runtime(sqlite_url, node_configs=False)
    runtime.advance(10 * 60)
    assert reports and _relayouts(reports) == []
    assert all(not any(gpu) for node in _mig_layouts(runtime) for gpu in node)
    model = runtime.cluster.snapshot().model("resnet50-vision")
    assert model is not None and model.replicas_ready > 0  # bound by GPU share, as before


class _RefusingSharing:
    def apply_sharing(self, node: str, layout: SharingLayout) -> ActionOutcome:
        return ActionOutcome(node, False, "device-plugin config map unavailable", retryable=True)


def test_a_re_layout_whose_node_could_not_be_made_exclusive_first_is_not_started(
        sqlite_url: str) -> None:
    runtime, _ = _runtime(sqlite_url)
    assert runtime.cluster.set_size("a100-80gb", 1).ok
    runtime.advance(300, run_jobs=False)  # the node is up, with MIG off
    node = "a100-80gb-0001"
    assert runtime.cluster.apply_sharing(node, SharingLayout(SharingMode.MPS, 4)).ok
    report = reconcile_once(replace(runtime.deps, sharing=_RefusingSharing()), runtime.config)
    assert report.plan is not None
    kinds = [(a.kind, a.reason) for a in report.plan.actions if a.target == node]
    assert kinds == [("apply_sharing", "exclusive_before_mig"),
                     ("relayout_mig", "plan_needs_mig")]
    outcomes = [o for o in report.outcomes if o.target == node]
    assert [o.ok for o in outcomes] == [False, False] and outcomes[1].retryable
    # MPS stays on whole GPUs: the device plugin cannot share MIG devices
    assert runtime.cluster.in_flight() == {} and runtime.cluster.relayouts_started == 0
