"""`headroom status` tells the replica target the fleet reported (observed) from the one the
tick wanted (desired: what ``headroom_model_replicas{kind="target"}`` exports), which differ
while the guards pace the way there."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from clihelpers import headroom_status, status_json

from controlplane.adapters.clock import WallClock
from controlplane.cli.status_view import replicas_cell
from controlplane.domain.fleet_status import ModelStatus
from controlplane.domain.guards import GuardMemory, Recommendation
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.domain.planner import wanted_replicas
from controlplane.domain.tick import TickReport, TickStatus
from controlplane.fleet_lease import FLEET_LEASE
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from controlplane.store.status_reader import read_fleet_status

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def _model(ready: int, pending: int, target: int, desired: int | None,
           observed: bool = True) -> ModelStatus:
    return ModelStatus("bert-embed", "", observed, True, 10.0, ready, pending, target, 50.0,
                       None, replicas_desired=desired)


def test_the_replicas_cell_adds_the_desired_target_only_where_the_tick_wanted_another() -> None:
    assert replicas_cell(_model(2, 1, 3, 6)) == "2/1/3->6"
    assert replicas_cell(_model(2, 1, 3, 3)) == "2/1/3"
    assert replicas_cell(_model(2, 1, 3, None)) == "2/1/3"  # not recorded: nothing claimed
    assert replicas_cell(_model(0, 0, 0, 4, observed=False)) == "-"


def test_the_wanted_replicas_are_the_recommendations_made_at_the_tick_itself() -> None:
    memory = GuardMemory(history=(
        ("model/bert-embed", (Recommendation(AT - timedelta(seconds=30), 4),
                              Recommendation(AT, 6))),
        ("model/llama-3-70b", (Recommendation(AT - timedelta(seconds=30), 2),)),
        ("pool/l4", (Recommendation(AT, 9),))))
    assert wanted_replicas(memory, AT) == {"bert-embed": 6}
    assert wanted_replicas(memory, AT + timedelta(seconds=30)) == {}


def test_status_shows_the_observed_target_as_observed_and_the_desired_one_beside_it(
        sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    at = WallClock().now() - timedelta(seconds=20)
    observed = ObservedState(at, (), (), (ObservedModel("bert-embed", 2, 1, 3, 40.0, 60.0),
                                          ObservedModel("llama-3-70b", 1, 0, 1, 5.0, 12.0)))
    memory = GuardMemory(history=(
        ("model/bert-embed", (Recommendation(at - timedelta(seconds=30), 4),
                              Recommendation(at, 6))),
        ("model/llama-3-70b", (Recommendation(at - timedelta(seconds=30), 2),))))
    store.save_tick(TickReport(at, at, TickStatus.APPLIED, "", observed, (), None, None, (),
                               memory))
    models = {m["name"]: m for m in status_json(sqlite_url)["models"]}
    assert (models["bert-embed"]["replicas_target"], models["bert-embed"]["replicas_desired"]) \
        == (3, 6)  # replicas_target keeps its meaning (observed) for scripts
    assert (models["llama-3-70b"]["replicas_target"],
            models["llama-3-70b"]["replicas_desired"]) == (1, None)  # this tick sized it not
    words = headroom_status(sqlite_url).stdout
    assert "Models (replicas ready/pending/observed target->desired target where the tick " \
        "wanted another;" in " ".join(words.split())  # the title, however it wraps
    rows = {line.split()[0]: line for line in words.splitlines() if "│" in line}
    assert " 2/1/3->6 " in rows["bert-embed"] and " 1/0/1 " in rows["llama-3-70b"]


def test_the_desired_target_status_reads_is_the_one_the_tick_exports_as_a_metric(
        sqlite_url: str) -> None:
    reports: list[TickReport] = []
    runtime = SimRuntime.open(load_settings(db={"url": sqlite_url}, sim={"history_s": 3600}),
                              Store.open(sqlite_url, migrate=True), AT)
    runtime.on_tick = lambda report, saved: reports.append(report)
    runtime.advance(120)
    status = read_fleet_status(runtime.store.engine, "store", FLEET_LEASE)
    exported = {r.model: r.target for r in reports[-1].replicas}  # ControlPlaneMetrics' source
    assert exported and {m.name: m.replicas_desired for m in status.models} == exported


def test_the_replicas_cell_says_how_many_pending_replicas_no_node_has_bound() -> None:
    assert replicas_cell(replace(_model(2, 2, 4, 6), replicas_unscheduled=1)) == (
        "2/2/4->6 (1 unscheduled)")
    assert replicas_cell(replace(_model(2, 1, 3, 3), replicas_unscheduled=0)) == "2/1/3"
