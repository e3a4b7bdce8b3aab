"""The cost read path and the pages work the same on SQLite and on PostgreSQL."""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path

import pytest
import streamlit as st
from dashboard_support import as_shown, seed_store
from sqlalchemy import create_engine
from streamlit.testing.v1 import AppTest

from controlplane import cost_export, cost_reader
from controlplane.store.engine import make_engine
from dashboard.context import page_response_timeout
from tests.stallproxy import StallProxy

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def _dashboard_on(url: str, monkeypatch: pytest.MonkeyPatch, timeout_s: float) -> AppTest:
    """The dashboard's first run on the store at ``url``, which raised no exception."""
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    at = AppTest.from_file(APP, default_timeout=timeout_s).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_cost_read_path_matches_the_simulated_bill_on_each_store(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = seed_store(store_url, 1.0)
    engine = make_engine(store_url)
    first_at, last_at = cost_reader.time_span(engine) or pytest.fail("no ticks")
    ticks = cost_reader.planned_ticks(engine, first_at, last_at)
    facts = cost_reader.tick_facts(engine, [ticks[-1].tick_id])[ticks[-1].tick_id]
    assert set(facts.billed_gpus) == {"A100-80GB", "H100-80GB", "L4"}
    assert set(facts.demand_rps) == {s.name for s in runtime.specs}
    placed = cost_reader.placed_usage(engine, [ticks[-1].plan_id], cost_reader.tenants(engine))
    assert sum(u.gpus for u in placed[ticks[-1].plan_id]) > 0
    result = cost_export.showback(engine, cost_reader.price_table(engine), first_at,
                                  runtime.clock.now(), step_s=60)
    prices = {p.name: p.price_per_gpu_hour for p in runtime.settings.pools}
    assert sum(a.usd for a in result.accruals) == pytest.approx(
        runtime.cluster.cost_usd(prices), rel=0.03)

    at = _dashboard_on(store_url, monkeypatch, 120)
    at.switch_page("views/cost.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert {m.label for m in at.metric} >= {"Total", "Serving", "Idle"}


@pytest.mark.postgres
def test_a_nan_load_in_a_postgresql_store_reads_unknown_and_n_a_not_ok_or_nan_percent(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_store(postgres_url, 0.25)
    engine = make_engine(postgres_url)
    with engine.begin() as connection:  # PostgreSQL keeps NaN floats; SQLite turns them to NULL
        connection.exec_driver_sql(
            "UPDATE ticks SET demand_rps = 'NaN' WHERE id = (SELECT max(id) FROM ticks)")
        connection.exec_driver_sql(
            "UPDATE observations SET capacity_rps = 'NaN' WHERE model = 'bert-embed'")
    engine.dispose()
    at = _dashboard_on(postgres_url, monkeypatch, 120)
    shown = {m.label: m for m in at.metric}
    assert shown["Load on capacity"].value == "n/a"
    assert (shown["SLO status"].value, shown["SLO status"].delta) == (
        "1 unknown", "6 models with load in the last 10 min")
    slo = next(d.value for d in at.dataframe if "status" in d.value.columns).set_index("model")
    assert slo.loc["bert-embed", "status"] == "unknown"
    assert set(slo.drop(index="bert-embed")["status"]) == {"ok"}


@pytest.mark.postgres
def test_a_store_that_goes_away_while_the_dashboard_runs_is_an_error_not_a_traceback(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_store(postgres_url, 0.005)
    at = _dashboard_on(postgres_url, monkeypatch, 120)
    server, name = postgres_url.rsplit("/", 1)
    admin = create_engine(f"{server}/test", isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:  # the dashboard's pooled engine is still open
        connection.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
    admin.dispose()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (error,) = at.error
    shown = as_shown(error.value)
    assert shown.startswith(f"Cannot read the store at `{postgres_url}`: ")
    assert f'database "{name}" does not exist' in shown
    assert "db upgrade" not in shown  # a store gone is no older schema


@pytest.mark.postgres
def test_a_postgresql_table_locked_by_another_session_is_an_error_within_seconds_not_a_hang(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_store(postgres_url, 0.005)
    at = _dashboard_on(postgres_url, monkeypatch, 60)
    locker = make_engine(postgres_url).connect()  # e.g. a migration rewriting the table
    try:  # the server ends the locking session after 20 s, so a dashboard that waits fails
        locker.exec_driver_sql("SET idle_in_transaction_session_timeout = '20s'")
        locker.exec_driver_sql("LOCK TABLE ticks IN ACCESS EXCLUSIVE MODE")
        st.cache_data.clear()  # as when the cached reads expire
        started = time.monotonic()
        at.run()
        waited_s = time.monotonic() - started
    finally:
        locker.invalidate()  # its session may already be gone
        locker.close()
    assert not at.exception, [e.value for e in at.exception]
    (error,) = at.error
    shown = as_shown(error.value)
    assert shown.startswith(f"Cannot read the store at `{postgres_url}`: ")
    assert "lock timeout" in shown and "another session holds a lock" in shown
    assert "db upgrade" not in shown  # a lock is no older schema
    assert waited_s < 30


@pytest.mark.postgres
def test_a_postgresql_read_that_runs_past_the_query_timeout_is_an_error_not_a_hang(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_store(postgres_url, 0.005)
    engine = make_engine(postgres_url)
    with engine.begin() as connection:  # a read the server takes 40 s over, taking no lock
        connection.exec_driver_sql("ALTER TABLE ticks RENAME TO recorded_ticks")
        connection.exec_driver_sql(
            "CREATE VIEW ticks AS SELECT t.* FROM recorded_ticks t, pg_sleep(40)")
    engine.dispose()
    monkeypatch.setenv("HEADROOM_DASHBOARD__QUERY_TIMEOUT_S", "2")
    started = time.monotonic()
    at = _dashboard_on(postgres_url, monkeypatch, 60)
    waited_s = time.monotonic() - started
    (error,) = at.error
    shown = as_shown(error.value)
    assert shown.startswith(f"Cannot read the store at `{postgres_url}`: ")
    assert shown.endswith("canceling statement due to statement timeout (a read of the "
                                "store took longer than dashboard.query_timeout_s = 2 s)")
    assert waited_s < 20


@pytest.mark.postgres
def test_the_dashboards_lock_timeout_keeps_the_options_the_store_url_sets(
        postgres_url: str) -> None:
    engine = make_engine(f"{postgres_url}?options=-csearch_path%3Dpg_catalog", lock_timeout_s=5)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SHOW search_path").scalar() == "pg_catalog"
        assert connection.exec_driver_sql("SHOW lock_timeout").scalar() == "5s"
    engine.dispose()


@pytest.mark.postgres
def test_a_page_whose_postgresql_network_stalls_fails_within_the_response_timeout_naming_the_server(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server never hears the read, so its statement_timeout cannot fire: the page's own
    bound does (db.response_timeout_s here; dashboard.query_timeout_s and a grace at most)."""
    seed_store(postgres_url, 0.005)
    with closing(StallProxy(("127.0.0.1", 5432))) as proxy:
        url = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
        proxy.stall_on(b"ticks")  # the page's first read of the schema: the network stalls
        monkeypatch.setenv("HEADROOM_DB__RESPONSE_TIMEOUT_S", "2")
        at = _dashboard_on(url, monkeypatch, 30)
        failed_at = time.monotonic()
    assert proxy.stalled_at is not None
    (error,) = at.error
    shown = as_shown(error.value)
    assert shown == (
        f"Cannot read the store at `{url}`: no answer from the database server at "
        f"127.0.0.1:{proxy.port} within 2 s (db.response_timeout_s): a stalled network or "
        "load balancer?")
    # The client's clock starts when it sends the read; the proxy sees those bytes a moment
    # later (a CI run measured 1.997 s), so the lower bound allows that hop.
    assert 2 - 0.25 <= failed_at - proxy.stalled_at < 2 + 1.5


def test_a_page_waits_on_a_silent_server_no_longer_than_the_query_timeout_and_a_grace() -> None:
    assert page_response_timeout(120.0, 60.0) == (65.0, "dashboard.query_timeout_s + 5 s")
    assert page_response_timeout(30.0, 60.0) == (30.0, "db.response_timeout_s")


@pytest.mark.postgres
def test_a_page_rerun_after_its_postgresql_network_stalled_fails_naming_both_timeouts(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pooled connection's pre-ping gets no answer, then neither does a new connection."""
    seed_store(postgres_url, 0.005)
    with closing(StallProxy(("127.0.0.1", 5432))) as proxy:
        url = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
        monkeypatch.setenv("HEADROOM_DB__RESPONSE_TIMEOUT_S", "2")
        monkeypatch.setenv("HEADROOM_DB__CONNECT_TIMEOUT_S", "2")
        at = _dashboard_on(url, monkeypatch, 30)
        assert not at.error
        proxy.stall()
        at.run()
        failed_at = time.monotonic()
    assert proxy.stalled_at is not None
    assert not at.exception, [e.value for e in at.exception]
    (error,) = at.error
    shown = as_shown(error.value)
    assert shown == (
        f"Cannot read the store at `{url}`: no connection to the database server at "
        f"127.0.0.1:{proxy.port} within 2 s (db.connect_timeout_s): it is down, or the "
        "network to it stalled")
    assert failed_at - proxy.stalled_at < 2 + 2 + 1.5
