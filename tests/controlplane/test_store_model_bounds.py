"""The models table's replica bounds and pause (SQLite and PostgreSQL): the bounds round-trip
through an import, a re-import keeps a pause, pause and resume touch only the model named, and
migration 0022 adds the columns (a model stored before has no bound and is not paused) and its
downgrade drops them; pausing a paused model keeps when and by whom it was first paused."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from old_model_rows import insert_old_model
from sqlalchemy import inspect
from tick_builders import T0

from controlplane.domain.pause import ModelPause, PauseSet
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store, downgrade, upgrade
from controlplane.store.pauses import SqlModelPauses

CHAT, SUPPORT = DEMO_MODELS[0], DEMO_MODELS[1]
COLUMNS = {"min_replicas", "max_replicas", "paused_replicas", "paused_at", "paused_by"}


def _columns(store: Store) -> set[str]:
    return {c["name"] for c in inspect(store.engine).get_columns("models")}


def test_migration_0022_adds_the_bound_and_pause_columns_and_its_downgrade_drops_them(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    assert _columns(store) >= COLUMNS
    downgrade(store.engine, "0021")
    assert not COLUMNS & _columns(store)
    with store.engine.begin() as connection:  # a model imported at 0021
        insert_old_model(connection, "L4")
    upgrade(store.engine)
    old, = Store.open(store_url).model_specs()
    assert (old.name, old.min_replicas, old.max_replicas) == ("old", None, None)
    assert SqlModelPauses(store.engine).paused_models() == ()


def test_replica_bounds_round_trip_and_a_re_import_keeps_a_pause(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    bounded = replace(CHAT, min_replicas=2, max_replicas=40)
    store.upsert_models([bounded, SUPPORT])
    assert store.model_specs() == sorted([bounded, SUPPORT], key=lambda s: s.name)
    pauses = SqlModelPauses(store.engine)
    assert pauses.pause(CHAT.name, 3, T0, "alice")
    store.upsert_models([replace(bounded, max_replicas=None)])  # re-imported: still paused
    assert pauses.paused_models() == (ModelPause(CHAT.name, 3, T0, "alice"),)
    assert next(s for s in store.model_specs() if s.name == CHAT.name).max_replicas is None


def test_pause_and_resume_touch_only_the_model_named_and_an_unknown_one_writes_nothing(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_models([CHAT, SUPPORT])
    pauses = SqlModelPauses(store.engine)
    assert not pauses.pause("no-such-model", 1, T0, "alice")
    assert pauses.paused_models() == ()
    assert pauses.pause(SUPPORT.name, None, T0, "bob")
    assert pauses.paused_models() == (ModelPause(SUPPORT.name, None, T0, "bob"),)
    assert pauses.resume(CHAT.name) is None  # not paused: nothing to resume
    assert pauses.resume(SUPPORT.name) == ModelPause(SUPPORT.name, None, T0, "bob")
    assert pauses.paused_models() == ()


def test_pausing_a_paused_model_keeps_its_start_and_changes_only_a_count_given(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_models([CHAT])
    pauses = SqlModelPauses(store.engine)
    first = ModelPause(CHAT.name, None, T0, "alice")
    assert pauses.pause(CHAT.name, None, T0, "alice") == PauseSet(first)
    later = T0 + timedelta(seconds=34)
    assert pauses.pause(CHAT.name, None, later, "bob") == PauseSet(first, first)
    assert pauses.paused_models() == (first,)
    recounted = replace(first, replicas=5)
    assert pauses.pause(CHAT.name, 5, later, "bob") == PauseSet(recounted, first)
    assert pauses.paused_models() == (recounted,)
    assert pauses.pause(CHAT.name, 5, later, "bob") == PauseSet(recounted, recounted)
    assert pauses.pause(CHAT.name, None, later, "bob") == PauseSet(recounted, recounted)


def test_a_model_stored_under_a_gfd_label_reads_back_under_the_catalogs_product_name(
        store_url: str) -> None:
    # an import before the models file held the catalog's name kept the label it was given,
    # which no pool's product (the catalog's name) matched
    store = Store.open(store_url, migrate=True)
    with store.engine.begin() as connection:
        insert_old_model(connection, "NVIDIA-L4", "G9")
    old, = store.model_specs()
    assert [p.product for p in old.profile] == ["L4", "G9"]  # an unknown product as stored
