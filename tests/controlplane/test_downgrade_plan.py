"""What a downgrade drops is read off the real migrations, run on a scratch SQLite file, so the
listing of `headroom db downgrade` cannot drift from them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import MigrationError, Store, upgrade
from controlplane.store.engine import scripts
from controlplane.store.pauses import SqlModelPauses
from controlplane.store.reversal import (
    StepChange,
    downgrade_plan,
    rehearsed_changes,
    step_change,
)

HEAD = scripts().get_current_head()


def test_a_lost_table_and_lost_columns_are_drops_and_one_column_swapped_is_a_rename() -> None:
    before = {"a": frozenset({"id", "x"}), "b": frozenset({"id", "old"}),
              "c": frozenset({"id"})}
    after = {"a": frozenset({"id"}), "b": frozenset({"id", "new"})}
    assert step_change(before, after) == StepChange(
        tables=("c",), columns=(("a", "x"),), renamed=(("b", "old", "new"),))


def test_every_downgrade_of_the_real_migrations_drops_what_its_upgrade_added() -> None:
    assert HEAD is not None
    changes = dict(zip([s.revision for s in scripts().walk_revisions()],
                       rehearsed_changes(HEAD, int(HEAD)), strict=True))
    assert changes["0030"] == StepChange((), (("observations", "arrivals_rps"),), ())
    assert changes["0029"] == StepChange(("fleet_pause",), (), ())
    assert changes["0028"] == StepChange((), (("placements", "gpu_index"),
                                              ("placements", "gpus")), ())
    assert changes["0027"] == StepChange((), (("observations", "kv_cache_usage"),
                                              ("observations", "queued_requests")), ())
    assert changes["0026"] == StepChange((), (("ticks", "synced"),), ())
    assert changes["0025"] == StepChange((), (), ())  # an index: no table or column
    assert changes["0024"] == StepChange((), (("plans", "kept_json"),), ())
    assert changes["0023"] == StepChange((), (("forecasts", "notes_json"),), ())
    assert set(changes["0022"].columns) == {("models", c) for c in (
        "min_replicas", "max_replicas", "paused_replicas", "paused_at", "paused_by")}
    assert changes["0012"].tables == ("gpu_price_history",)
    assert changes["0006"] == StepChange((), (), (("observations", "latency_ms",
                                                   "mean_latency_ms"),))
    assert changes["0010"] == changes["0013"] == changes["0019"] == StepChange((), (), ())
    assert {"models", "ticks", "observations", "plans"} <= set(changes["0001"].tables)


def test_a_plan_counts_the_values_a_dropped_column_holds_and_changes_nothing(
        tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}", migrate=True)
    store.upsert_models(DEMO_MODELS[:2])
    assert SqlModelPauses(store.engine).pause(DEMO_MODELS[0].name, 2,
                                              datetime(2026, 12, 3, tzinfo=UTC), "")
    plan = downgrade_plan(store.engine, "-9")
    assert (plan.stamped, plan.target) == (HEAD, "0021")
    assert [r.revision for r in plan.reversals] == ["0030", "0029", "0028", "0027", "0026",
                                                        "0025", "0024", "0023", "0022"]
    held = {d.name: d.held for r in plan.reversals for d in r.dropped}
    assert held["models.paused_replicas"] == held["models.paused_at"] == 1
    assert held["models.min_replicas"] == 0 and held["forecasts.notes_json"] == 0
    assert held["plans.kept_json"] == 0 and held["ticks.synced"] == 0
    assert held["observations.queued_requests"] == held["observations.kv_cache_usage"] == 0
    assert held["placements.gpus"] == held["placements.gpu_index"] == 0
    assert held["observations.arrivals_rps"] == 0
    assert [d.name for d in plan.losses] == ["models.paused_at", "models.paused_by",
                                             "models.paused_replicas"]
    assert downgrade_plan(store.engine, "head").reversals == ()


def test_a_plan_to_a_revision_above_the_stores_names_the_way_forward(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade(store.engine, "0020")
    with pytest.raises(MigrationError, match=r"cannot downgrade to '0022': the store is at "
                                             r"revision '0020', below it; `headroom db upgrade "
                                             r"0022` goes forward"):
        downgrade_plan(store.engine, "0022")
