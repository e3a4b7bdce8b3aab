"""``headroom serve --backend kubernetes`` takes a new models set from the store without a
restart: the set's config is rebuilt with serve's start checks and used whole, or refused whole
(the old set and config stay) with one error line naming why, tried again at the next change."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controlplane.models_in_use import InUse, ModelsInUse, models_change
from controlplane.reconcile_config import reconcile_config
from controlplane.settings import Settings, load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.hints import remove_model_and_hints
from controlplane.store.model_digest import model_specs_digested

LLAMA, MISTRAL, RESNET, BERT, LLAMA_70B, WHISPER = DEMO_MODELS
FIRST = (LLAMA, MISTRAL, RESNET, BERT, LLAMA_70B, WHISPER)


def _budgeted(tenant: str) -> Settings:
    settings = load_settings(None)
    return settings.model_copy(update={"autoscaling": settings.autoscaling.model_copy(
        update={"tenant_gpu_budgets": {tenant: 4.0}})})


def _in_use(settings: Settings) -> InUse:
    return InUse(FIRST, reconcile_config(settings, FIRST))


def test_a_new_set_names_what_it_adds_removes_and_changes_and_its_config_is_used() -> None:
    settings = load_settings(None)
    old = _in_use(settings)
    bounded = replace(LLAMA, max_replicas=2)
    new = (bounded, MISTRAL, RESNET, BERT, LLAMA_70B)
    change = models_change(settings, old, new)
    assert (change.added, change.removed, change.changed, change.refused) == (
        (), (WHISPER.name,), (LLAMA.name,), "")
    assert change.in_use.specs == new
    assert [m.spec for m in change.in_use.config.models] == [
        m.spec for m in reconcile_config(settings, new).models]
    assert [m.spec.max_replicas for m in change.in_use.config.models
            if m.spec.name == LLAMA.name] == [2]


def test_a_set_that_adds_a_model_names_it_added() -> None:
    settings = load_settings(None)
    old = InUse(FIRST[:5], reconcile_config(settings, FIRST[:5]))
    change = models_change(settings, old, FIRST)
    assert (change.added, change.removed, change.changed) == ((WHISPER.name,), (), ())
    assert {m.spec.name for m in change.in_use.config.models} == {s.name for s in FIRST}


def test_a_set_without_the_tenant_a_gpu_budget_names_is_refused_and_the_old_config_kept_whole(
        ) -> None:
    settings = _budgeted(WHISPER.tenant)
    old = _in_use(settings)
    change = models_change(settings, old, (LLAMA, MISTRAL, RESNET, BERT))
    assert change.in_use is old
    assert change.removed == (LLAMA_70B.name, WHISPER.name)
    assert "autoscaling.tenant_gpu_budgets" in change.refused
    assert repr(WHISPER.tenant) in change.refused


def test_an_empty_set_is_refused_as_serve_refuses_to_start_on_one() -> None:
    settings = load_settings(None)
    old = _in_use(settings)
    change = models_change(settings, old, ())
    assert change.in_use is old and change.refused == "the store lists no models"


def test_the_same_set_changes_nothing() -> None:
    settings = load_settings(None)
    old = _in_use(settings)
    change = models_change(settings, old, FIRST)
    assert change.in_use is old and not change.any and change.refused == ""


def _held(tmp_path: Path, settings: Settings) -> tuple[Store, ModelsInUse]:
    store = Store.open(f"sqlite:///{tmp_path / 'models.db'}", migrate=True)
    store.upsert_models(FIRST)
    digest, specs = model_specs_digested(store.engine)
    return store, ModelsInUse(settings, store.engine, digest, specs)


def test_an_import_is_used_at_the_next_reload_with_one_info_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, models = _held(tmp_path, load_settings(None))
    assert models.reload_if_changed() is None  # nothing changed since start
    store.upsert_models((replace(RESNET, max_replicas=3),))
    with caplog.at_level(logging.INFO, logger="headroom.models"):
        change = models.reload_if_changed()
    assert change is not None and change.changed == (RESNET.name,)
    assert [s.max_replicas for s in models.specs if s.name == RESNET.name] == [3]
    assert models.replica_rps()[RESNET.name] == RESNET.best_point().replica_rps
    records = [r for r in caplog.records if r.name == "headroom.models"]
    assert [(r.levelname, r.getMessage()) for r in records] == [("INFO", "models.reloaded")]
    assert (records[0].__dict__["changed"], records[0].__dict__["removed"]) == (
        [RESNET.name], [])


def test_a_refused_removal_logs_one_error_keeps_the_old_set_and_is_tried_at_the_next_change(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, models = _held(tmp_path, _budgeted(WHISPER.tenant))
    config = models.config
    for name in (LLAMA_70B.name, WHISPER.name):
        remove_model_and_hints(store.engine, name, datetime.now(UTC), keep_hints=True)
    with caplog.at_level(logging.INFO, logger="headroom.models"):
        assert models.reload_if_changed() is not None
        assert models.reload_if_changed() is None  # the same table: not tried again
    assert models.config is config and models.names() == sorted(s.name for s in FIRST)
    records = [r for r in caplog.records if r.name == "headroom.models"]
    assert [(r.levelname, r.getMessage()) for r in records] == [
        ("ERROR", "models.reload_refused")]
    assert "tenant_gpu_budgets" in records[0].__dict__["error"]
    store.upsert_models((WHISPER,))  # the budget's tenant is back: the next change is used
    change = models.reload_if_changed()
    assert change is not None and change.refused == ""
    assert models.names() == sorted(s.name for s in FIRST if s is not LLAMA_70B)


def test_a_reload_that_drops_a_model_with_its_own_query_warns_naming_the_entry(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings(None, prometheus={"model_queries": {
        MISTRAL.name: {"query": 'sum(rate(tokens_total{model="{model}"}[{window}]))'}}})
    store, models = _held(tmp_path, settings)
    remove_model_and_hints(store.engine, MISTRAL.name, datetime.now(UTC), keep_hints=True)
    with caplog.at_level(logging.INFO, logger="headroom.models"):
        change = models.reload_if_changed()
    assert change is not None and change.removed == (MISTRAL.name,)
    records = [(r.levelname, r.getMessage(), r.__dict__.get("models"))
               for r in caplog.records if r.name == "headroom.models"]
    assert records == [("INFO", "models.reloaded", 5),
                       ("WARNING", "models.query_unmatched", [MISTRAL.name])]
    store.upsert_models((MISTRAL,))  # back: its query applies again, nothing to warn
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="headroom.models"):
        assert models.reload_if_changed() is not None
    assert [r.getMessage() for r in caplog.records if r.name == "headroom.models"] == [
        "models.reloaded"]
