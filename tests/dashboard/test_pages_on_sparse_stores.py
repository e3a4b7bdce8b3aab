"""The pages over stores an operator meets before there is much in them: a store a quarter of an
hour old, a single tick, a store with no recent load observations."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from dashboard_support import open_page, seed_store
from streamlit.testing.v1 import AppTest

from controlplane.store.engine import make_engine


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: str(m.value) for m in at.metric}


def usd(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))


def test_a_store_a_quarter_of_an_hour_old_is_billed_for_its_gpus_not_zero(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'young.db'}"
    runtime = seed_store(url, 0.25)
    bill_usd = runtime.cluster.cost_usd({p.name: p.price_per_gpu_hour
                                         for p in runtime.settings.pools})
    cost = metrics(open_page(url, "views/cost.py", monkeypatch))
    assert usd(cost["Total"]) == pytest.approx(bill_usd, rel=0.15)
    assert cost["$ per 1M requests"].startswith("$")
    overview = metrics(open_page(url, "views/overview.py", monkeypatch))
    assert overview["$ per 1M requests"].startswith("$")


def test_a_store_with_a_single_tick_says_cost_shows_after_the_next_tick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'one-tick.db'}"
    seed_store(url, 0.005)  # 18 simulated seconds: the first reconcile tick only
    at = open_page(url, "views/cost.py", monkeypatch)
    assert [i.value for i in at.info] == [
        "Only one reconcile tick so far: cost accrues from one tick to the next, so it shows "
        "after the next tick."]


def test_no_recent_load_observation_is_no_slo_verdict_rather_than_all_ok(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'no-load.db'}"
    seed_store(url, 0.25)
    with make_engine(url).begin() as connection:
        connection.exec_driver_sql("DELETE FROM observations")
    at = open_page(url, "views/overview.py", monkeypatch)
    slo = next(m for m in at.metric if m.label == "SLO status")
    assert (slo.value, slo.delta) == ("n/a", "no load observed in the last 10 min")


def test_demand_before_any_capacity_is_ready_reads_no_capacity_ready_not_n_a(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'one-tick.db'}"
    seed_store(url, 0.005, start_warm=False)  # the first tick on empty pools: no replica ready
    shown = metrics(open_page(url, "views/overview.py", monkeypatch))
    assert shown["Load on capacity"] == "no capacity ready"
    assert shown["SLO status"] == "6 short"


def test_malformed_stored_forecasts_are_counted_and_left_out_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'bad-forecasts.db'}"
    seed_store(url, 0.25)
    with make_engine(url).begin() as connection:
        bad = connection.exec_driver_sql(
            "SELECT count(*) FROM forecasts WHERE model = 'llama-3-70b'").scalar()
        connection.exec_driver_sql(
            "UPDATE forecasts SET step_s = 0 WHERE model = 'llama-3-70b' AND id % 2 = 0")
        connection.exec_driver_sql(
            "UPDATE forecasts SET p90_json = '[1.0]' WHERE model = 'llama-3-70b' AND id % 2 = 1")
    at = open_page(url, "views/models.py", monkeypatch)
    at.selectbox[0].set_value("llama-3-70b").run()
    assert not at.exception, [e.value for e in at.exception]
    assert [w.value for w in at.warning] == [
        f"{bad} stored forecast(s) of llama-3-70b left out: a step of 0 s or p90 values not "
        "matching the p50 values."]
    assert metrics(at)["WAPE p50 @ 20 min"] == "n/a"


def test_ticks_without_any_plan_show_n_a_dollars_per_hour_not_zero(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'no-plans.db'}"
    seed_store(url, 0.25)
    with make_engine(url).begin() as connection:  # as if every tick so far stopped before planning
        for table in ("outcomes", "actions", "placements", "plans"):
            connection.exec_driver_sql(f"DELETE FROM {table}")
        connection.exec_driver_sql("UPDATE ticks SET status = 'skipped', reason = 'stale snapshot'")
        ticks = connection.exec_driver_sql("SELECT count(*) FROM ticks").scalar()
    at = open_page(url, "views/overview.py", monkeypatch)
    shown = metrics(at)
    assert (shown["$ / h now"], shown["GPU allocation"]) == ("n/a", "n/a")
    assert [i.value for i in at.info] == [
        f"No plan recorded yet: {ticks} tick(s) so far, the newest skipped (stale snapshot). GPU "
        "allocation and $ / h show once a tick records a plan."]


def test_a_models_newest_observation_from_long_ago_is_shown_as_last_seen_not_as_now(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'stopped-model.db'}"
    seed_store(url, 0.5)
    with make_engine(url).begin() as connection:  # the loop stopped observing one model
        newest = connection.exec_driver_sql("SELECT max(at) FROM observations").scalar()
        connection.exec_driver_sql(
            "DELETE FROM observations WHERE model = 'llama-3-70b' AND at > ?",
            (datetime.fromisoformat(str(newest)) - timedelta(minutes=20),))
    at = open_page(url, "views/models.py", monkeypatch)
    at.selectbox[0].set_value("llama-3-70b").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = {m.label: m for m in at.metric}
    assert "Demand now" not in shown
    assert shown["Demand (last seen)"].delta.endswith("min before the newest tick")
    other = open_page(url, "views/models.py", monkeypatch)
    other.selectbox[0].set_value("bert-embed").run()
    assert "Demand now" in {m.label for m in other.metric}


def test_a_fleet_billed_for_no_gpu_costs_zero_dollars_rather_than_reading_as_no_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'scaled-to-zero.db'}"
    seed_store(url, 0.25)
    with make_engine(url).begin() as connection:  # every pool scaled to zero, nothing placed
        for tick_id, document in list(connection.exec_driver_sql(
                "SELECT id, observed_json FROM ticks")):
            observed = json.loads(document)
            for pool in observed["pools"]:
                pool["nodes_ready"] = pool["nodes_pending"] = 0
            connection.exec_driver_sql("UPDATE ticks SET observed_json = ? WHERE id = ?",
                                       (json.dumps(observed), tick_id))
        connection.exec_driver_sql("DELETE FROM placements")
        connection.exec_driver_sql("UPDATE plans SET gpus_placed = 0, warm_gpus = 0")
    at = open_page(url, "views/cost.py", monkeypatch)
    assert "No plan in this window yet." not in [i.value for i in at.info]
    assert [i.value for i in at.info] == ["No GPU was billed in this window: the plans in force "
                                          "had no ready or provisioning node in any pool."]
    shown = metrics(at)
    assert [shown[k] for k in ("Total", "Serving", "Warm", "Idle")] == ["$0.00"] * 4
    assert at.get("download_button"), "the (empty) CSV export is still offered"
    assert [c.value for c in at.caption].count("Nothing billed in this window.") == 2  # no charts


def test_a_young_stores_cost_per_million_requests_names_its_window_in_minutes_not_0_h(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'young.db'}"
    seed_store(url, 0.25)
    at = open_page(url, "views/overview.py", monkeypatch)
    per_million = next(m for m in at.metric if m.label == "$ per 1M requests")
    assert per_million.help == ("last 15 min: all GPU dollars (idle and warm included) / "
                                "requests served")
