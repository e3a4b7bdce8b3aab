"""The store on SQLite and PostgreSQL: migrations up and down, and round trips of every record."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import event, inspect
from sqlmodel import col, select
from tick_builders import T0, sample_tick_report

from controlplane.domain.actions import ActionOutcome, ApplySharing, RelayoutMig, SetReplicas
from controlplane.domain.guards import GuardMemory, Recommendation
from controlplane.domain.mig_layout import uniform
from controlplane.domain.models import SharingMode
from controlplane.domain.observed import ObservedGpu, ObservedNode
from controlplane.domain.sharing_config import SharingLayout
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store, StoreUnavailable, downgrade, upgrade
from controlplane.store.status_reader import read_fleet_status
from controlplane.store.tables import ActionRecord, ObservationRecord, OutcomeRecord
from forecaster.types import Forecast

TABLES = {"models", "nodes", "gpus", "observations", "forecasts", "ticks", "plans", "actions",
          "outcomes", "placements", "gpu_prices"}


def test_migrations_create_every_table_and_downgrade_removes_them(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    assert set(inspect(store.engine).get_table_names()) >= TABLES
    downgrade(store.engine, "base")
    assert not TABLES & set(inspect(store.engine).get_table_names())
    upgrade(store.engine)
    assert set(inspect(store.engine).get_table_names()) >= TABLES


def test_a_store_with_ticks_and_plans_downgrades_past_every_revision_and_back_keeping_them(
        store_url: str) -> None:
    # on SQLite the downgrade of 0005 rebuilds the ticks table every plan refers to
    store = Store.open(store_url, migrate=True)
    store.save_tick(sample_tick_report())
    downgrade(store.engine, "0001")
    upgrade(store.engine)
    assert store.counts() == {"ticks": 1, "plans": 1, "placements": 1, "actions": 3,
                              "forecasts": 0}
    with store.engine.connect() as connection:  # the keys are enforced again afterwards
        foreign_keys = connection.exec_driver_sql("PRAGMA foreign_keys").scalar() if (
            store.engine.dialect.name == "sqlite") else 1
    assert foreign_keys == 1
    assert store.save_tick(sample_tick_report()) == 2


def test_tick_report_lands_whole_with_plan_actions_outcomes_and_placements(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    tick_id = store.save_tick(sample_tick_report())
    assert tick_id >= 1
    counts = store.counts()
    assert counts["ticks"] == 1 and counts["plans"] == 1 and counts["placements"] == 1
    assert counts["actions"] == 3  # two actions + one skipped change
    assert store.last_guard_memory().for_target("pool/l4") == (Recommendation(T0, 2),)
    assert store.last_observed() == sample_tick_report().observed
    assert store.last_tick_at() == T0


def test_two_actions_on_one_node_keep_their_own_outcomes(store_url: str) -> None:
    report = sample_tick_report()
    assert report.plan is not None
    mps = SharingLayout(SharingMode.MPS, 4)
    exclusive = SharingLayout(SharingMode.EXCLUSIVE)
    node_actions = (ApplySharing("n1", mps, exclusive, "fleet_plan"),
                    RelayoutMig("n1", uniform("A100-80GB", ()), uniform("A100-80GB", (
                        "7g.80gb",)), "fleet_plan"))
    plan = replace(report.plan, actions=(*report.plan.actions, *node_actions))
    outcomes = (*report.outcomes, ActionOutcome("n1", True, "shared"),
                ActionOutcome("n1", False, "busy", retryable=True))
    store = Store.open(store_url, migrate=True)
    store.save_tick(replace(report, plan=plan, outcomes=outcomes))
    with store.session() as session:
        rows = session.exec(select(ActionRecord.kind, OutcomeRecord.message)
                            .join(OutcomeRecord, col(OutcomeRecord.action_id) == ActionRecord.id)
                            .order_by(col(ActionRecord.ordinal))).all()
    assert [tuple(r) for r in rows][2:] == [("apply_sharing", "shared"), ("relayout_mig", "busy")]


def test_a_tick_with_5000_actions_lands_whole_and_in_a_few_round_trips_to_a_server(
        store_url: str) -> None:
    report = sample_tick_report()
    assert report.plan is not None
    actions = tuple(SetReplicas(f"model-{i}", 1, 2, "forecast_p90") for i in range(5000))
    outcomes = tuple(ActionOutcome(f"model-{i}", i % 2 == 0, f"outcome {i}")
                     for i in range(5000))
    store = Store.open(store_url, migrate=True)
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda *args: statements.append(args[2]))
    store.save_tick(replace(report, plan=replace(report.plan, actions=actions),
                            outcomes=outcomes))
    assert store.counts()["actions"] == 5001  # and the skipped change
    if store.engine.dialect.name == "postgresql":  # a round trip each; SQLite's are in process
        assert sum(s.startswith("INSERT INTO actions") for s in statements) <= 10
    with store.session() as session:
        rows = session.exec(select(ActionRecord.ordinal, ActionRecord.target,
                                   OutcomeRecord.ok, OutcomeRecord.message)
                            .join(OutcomeRecord, col(OutcomeRecord.action_id) == ActionRecord.id)
                            .order_by(col(ActionRecord.ordinal))).all()
    assert [tuple(r) for r in rows] == [(i, f"model-{i}", i % 2 == 0, f"outcome {i}")
                                        for i in range(5000)]


def test_a_node_with_the_longest_name_kubernetes_allows_is_saved_with_its_actions(
        store_url: str) -> None:
    node = ("n" * 236) + ".compute.internal"  # 253 characters
    report = sample_tick_report()
    assert report.plan is not None and len(node) == 253
    observed = replace(report.observed, nodes=(ObservedNode(
        node, "a100", "A100-80GB", True, 8000, 64_000,
        (ObservedGpu(0, "A100-80GB", 81_920, True, ("7g.80gb",), "mig"),)),))
    actions = (ApplySharing(node, SharingLayout(SharingMode.MPS, 4),
                            SharingLayout(SharingMode.EXCLUSIVE), "fleet_plan"),)
    store = Store.open(store_url, migrate=True)
    store.save_observed(observed)  # PostgreSQL refused it (varchar(200)): every tick failed
    store.save_tick(replace(report, observed=observed, plan=replace(report.plan,
                                                                     actions=actions),
                            outcomes=()))
    with store.session() as session:
        assert session.exec(select(ActionRecord.target)).all()[0] == node
    assert store.last_observed() == observed


def test_models_and_forecasts_round_trip(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    store.upsert_models(DEMO_MODELS)  # idempotent
    assert store.model_specs() == sorted(DEMO_MODELS, key=lambda s: s.name)
    older = Forecast("bert-embed", T0, 60, (1.0, 2.0), (1.5, 2.5), "persistence")
    newer = Forecast("bert-embed", T0 + timedelta(minutes=5), 60, (3.0,), (4.0,), "hybrid",
                     "short_history", 0.12)
    store.save_forecasts([older], computed_at=T0)
    store.save_forecasts([newer], computed_at=T0 + timedelta(minutes=5))
    assert store.latest_forecasts() == {"bert-embed": newer}


def test_rate_history_averages_per_step_and_marks_gaps_as_missing(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_observations([("m", T0, 10.0), ("m", T0 + timedelta(seconds=30), 20.0),
                             ("m", T0 + timedelta(minutes=2), 40.0), ("other", T0, 99.0)])
    series = store.rate_history("m", T0, T0 + timedelta(minutes=3), 60)
    assert series.values[0] == 15.0
    assert math.isnan(series.values[1])
    assert series.values[2] == 40.0
    assert series.start_at == T0


def test_a_model_whose_demand_was_not_measured_leaves_a_gap_in_history_not_a_zero(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    report = sample_tick_report()
    (bert,) = report.observed.models
    unknown = replace(bert, demand_rps=0.0, demand_measured=False)
    for at, model in ((T0, bert), (T0 + timedelta(minutes=1), unknown)):
        observed = replace(report.observed, synced_at=at, models=(model,))
        store.save_observed(observed)
        store.save_tick(replace(report, started_at=at, observed=observed))
    series = store.rate_history("bert-embed", T0, T0 + timedelta(minutes=2), 60)
    assert series.values[0] == 500.0 and math.isnan(series.values[1])
    last = store.last_observed()  # the tick's snapshot keeps the model, marked unknown
    assert last is not None and last.models == (unknown,)


def test_the_last_observation_time_is_the_newest_of_that_model_only(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_observations([("m", T0, 10.0), ("m", T0 + timedelta(minutes=2), 40.0),
                             ("other", T0 + timedelta(hours=1), 99.0)])
    assert store.last_observed_at("m") == T0 + timedelta(minutes=2)
    assert store.last_observed_at("never") is None


PLUS_TWO = timezone(timedelta(hours=2), "UTC+2")


def test_a_time_given_in_another_zone_is_stored_as_the_same_instant_in_utc(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_tick(replace(sample_tick_report(), started_at=T0.astimezone(PLUS_TWO)))
    store.save_observations([("m", T0.astimezone(PLUS_TWO), 10.0)])
    assert store.last_tick_at() == T0
    assert store.last_observed_at("m") == T0
    with store.engine.connect() as connection:  # the stored wall time is UTC's, not +02:00's
        (stored,) = connection.execute(select(ObservationRecord.at)).scalars()
    assert (stored.hour, stored.utcoffset()) == (12, None if stored.tzinfo is None else
                                                 timedelta(0))


def test_a_window_given_in_another_zone_finds_the_rows_of_that_instant(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_observations([("m", T0, 10.0), ("m", T0 + timedelta(minutes=1), 20.0)])
    window_at = (T0 + timedelta(minutes=1)).astimezone(PLUS_TWO)
    series = store.rate_history("m", window_at, window_at + timedelta(minutes=1), 60)
    assert series.values == (20.0,)


def test_a_naive_time_is_taken_as_utc_on_both_backends_whatever_the_session_zone(
        store_url: str) -> None:
    if store_url.startswith("postgresql"):  # PostgreSQL would take it in the session's zone
        store_url += "?options=-c%20timezone%3DEurope%2FBerlin"
    store = Store.open(store_url, migrate=True)
    store.save_observations([("m", T0.replace(tzinfo=None), 10.0)])
    assert store.last_observed_at("m") == T0


def test_a_store_whose_path_holds_a_percent_sign_migrates(tmp_path: Path) -> None:
    path = tmp_path / "100%" / "store.db"  # configparser refused the '%' in alembic's URL
    store = Store.open(f"sqlite:///{path}", migrate=True)
    assert set(inspect(store.engine).get_table_names()) >= TABLES
    assert path.is_file()


def test_a_store_in_the_home_directory_is_the_file_every_command_looks_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    url = "sqlite:///~/headroom/store.db"
    Store.open(url, migrate=True).engine.dispose()  # `headroom db upgrade`
    assert (tmp_path / "home" / "headroom" / "store.db").is_file()
    assert not (tmp_path / "~").exists()  # no directory named '~' where it ran
    assert Store.listed_model_count(url) == 0  # `headroom status`, `hint`: the same file
    assert inspect(Store.open_existing(url).engine).has_table("ticks")


def test_the_listed_model_count_is_read_without_migrating_the_store(store_url: str) -> None:
    Store.open(store_url).engine.dispose()  # a database, no schema
    assert Store.listed_model_count(store_url) == 0
    store = Store.open(store_url)
    assert inspect(store.engine).get_table_names() == []  # not migrated by the count
    upgrade(store.engine)
    store.upsert_models(DEMO_MODELS)
    assert Store.listed_model_count(store_url) == len(DEMO_MODELS)


def test_the_listed_model_count_of_a_missing_sqlite_file_creates_neither_file_nor_directory(
        tmp_path: Path) -> None:
    path = tmp_path / "100% sure?#" / "store.db"
    with pytest.raises(StoreUnavailable, match="no such database file"):
        Store.listed_model_count(f"sqlite:///{path}")
    assert list(tmp_path.iterdir()) == []
    store = Store.open(f"sqlite:///{path}", migrate=True)  # the read-only URI quotes the path
    store.upsert_models(DEMO_MODELS[:1])
    assert Store.listed_model_count(f"sqlite:///{path}") == 1



def test_the_read_only_open_of_a_file_named_with_a_hash_reads_that_file_and_makes_none(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h#1.db'}"
    Store.open(url, migrate=True).upsert_models(DEMO_MODELS[:1])
    assert Store.listed_model_count(url) == 1  # before: 0, from a new empty file 'h'
    made = {p.name.removesuffix("-wal").removesuffix("-shm") for p in tmp_path.iterdir()}
    assert made == {"h#1.db"}

def test_unreachable_database_names_the_url_as_given_without_password() -> None:
    with pytest.raises(StoreUnavailable) as caught:
        Store.open("postgresql://alice:secret@127.0.0.1:1/nowhere", connect_timeout_s=1)
    assert "cannot reach database postgresql://alice@127.0.0.1:1/nowhere: " in str(caught.value)
    assert "secret" not in str(caught.value)


def test_a_file_that_is_no_database_is_refused_as_not_a_store_and_left_as_it_was(
        tmp_path: Path) -> None:
    path = tmp_path / "headroom.db"
    path.write_bytes(b"not a database, just some garbage\n" * 200)
    with pytest.raises(StoreUnavailable) as caught:
        Store.open(f"sqlite:///{path}", migrate=True)
    assert str(caught.value) == (
        f"cannot open database sqlite:///{path}: file is not a database (not a Headroom store, "
        "or damaged: move the file aside, and `headroom db upgrade`, `demo` or `serve` makes a new "
        "store in its place)")
    assert path.read_bytes() == b"not a database, just some garbage\n" * 200


def test_guard_memory_keeps_recent_changes_for_cooldowns_across_restarts(store_url: str) -> None:
    from dataclasses import replace

    from controlplane.domain.guards import Change

    memory = GuardMemory((("pool/l4", (Recommendation(T0, 2),)),),
                         (("pool/l4", (Change(T0, 1), Change(T0 + timedelta(seconds=30), -1))),))
    store = Store.open(store_url, migrate=True)
    store.save_tick(replace(sample_tick_report(), guard_memory=memory))
    assert store.last_guard_memory() == memory


def test_a_configured_price_is_labelled_as_the_pools_setting_and_a_list_price_as_the_list(
        store_url: str) -> None:
    from controlplane.cost_reader import configured_prices
    from controlplane.domain.desired import PoolSpec

    store = Store.open(store_url, migrate=True)
    store.upsert_prices([PoolSpec("a100", "A100-80GB", 8, 0, 4, 3.40),
                         PoolSpec("h100", "H100-80GB", 8, 0, 4, 6.88)], T0)
    prices = {p.product: p for p in configured_prices(store.engine)}
    negotiated, listed = prices["A100-80GB"], prices["H100-80GB"]
    assert (negotiated.usd_per_gpu_hour, negotiated.source, negotiated.as_of) == (
        3.40, "settings pools[a100].price_per_gpu_hour", T0.date().isoformat())
    assert listed.source.startswith("REFERENCE.md §10.1") and listed.as_of == "2025-06"


def test_a_configured_price_is_dated_when_it_takes_effect_in_store_time_not_the_wall_clock(
        store_url: str) -> None:
    from controlplane.cost_reader import configured_prices
    from controlplane.domain.desired import PoolSpec

    store = Store.open(store_url, migrate=True)
    wall_at = T0 + timedelta(days=2)  # a simulated fleet resumed two days of wall time later
    store.upsert_prices([PoolSpec("a100", "A100-80GB", 8, 0, 4, 3.40)], wall_at, T0)
    (price,) = configured_prices(store.engine)
    assert price.as_of == T0.date().isoformat()


def test_a_snapshot_keeps_the_age_of_its_rates_across_a_restart(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    report = sample_tick_report()
    dated = replace(report.observed, data_at=report.observed.synced_at - timedelta(minutes=10))
    store.save_tick(replace(report, observed=dated))
    seen = Store.open(store_url).last_observed()
    assert seen is not None and seen.data_at == dated.data_at
    assert seen.oldest_at == dated.data_at


def test_a_ticks_demand_and_capacity_totals_count_the_same_measured_models(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    report = sample_tick_report()
    (bert,) = report.observed.models
    unknown = replace(bert, name="llama", demand_rps=0.0, capacity_rps=300.0,
                      demand_measured=False)
    store.save_tick(replace(report, observed=replace(report.observed, models=(bert, unknown))))
    status = read_fleet_status(store.engine, "test", "headroom-leader")
    assert status.last_tick is not None
    # llama's capacity against none of its demand would make the fleet look less loaded
    assert (status.last_tick.demand_rps, status.last_tick.capacity_rps) == (
        bert.demand_rps, bert.capacity_rps)
