"""A PostgreSQL store whose network stalls (a partition, a dead load balancer: the connection
stays open, no byte comes back) fails the read or write waiting on it within
``db.response_timeout_s``, naming the database host, instead of hanging it for ever: the
server's statement_timeout cannot help, since the server never hears the statement."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import OperationalError

from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import MigrationError, Store, upgrade
from controlplane.store.engine import MIGRATIONS_DIR, make_engine
from controlplane.store.pg_response import DEFAULT_RESPONSE_TIMEOUT_S
from tests.stallproxy import StallProxy

GUARD_S = 30.0  # the test's own bound: an unbounded wait fails the test instead of hanging it


@pytest.fixture
def proxy() -> Iterator[StallProxy]:
    with closing(StallProxy(("127.0.0.1", 5432))) as stall_proxy:
        yield stall_proxy


def proxied(url: str, proxy: StallProxy) -> str:
    return url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")


def outcome_within(call: Callable[[], Any], guard_s: float = GUARD_S) -> tuple[float, Any]:
    """(seconds taken, what ``call`` returned or raised), run in a thread the test stops
    waiting for after ``guard_s``."""
    done: list[Any] = []

    def run() -> None:
        try:
            done.append(call())
        except Exception as error:
            done.append(error)

    started_at = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(guard_s)
    assert not worker.is_alive(), f"still waiting after {guard_s:g} s on a stalled store"
    return time.monotonic() - started_at, done[0]


@pytest.mark.postgres
def test_a_statement_on_a_stalled_connection_fails_within_the_response_timeout_naming_the_host(
        postgres_url: str, proxy: StallProxy) -> None:
    engine = make_engine(proxied(postgres_url, proxy), connect_timeout_s=2, response_timeout_s=2)
    try:
        with engine.connect() as connection:
            assert connection.execute(text("SELECT 1")).scalar_one() == 1
            proxy.stall()
            taken_s, raised = outcome_within(
                lambda: connection.execute(text("SELECT 2")).scalar_one())
    finally:
        engine.dispose()
    assert isinstance(raised, OperationalError)
    assert (f"no answer from the database server at 127.0.0.1:{proxy.port} within 2 s "
            "(db.response_timeout_s): a stalled network or load balancer?") in str(raised)
    assert 1.9 < taken_s < 3.5


@pytest.mark.postgres
def test_a_store_read_after_the_network_stalled_fails_within_both_timeouts_naming_the_server(
        postgres_url: str, proxy: StallProxy) -> None:
    """The pooled connection's pre-ping meets the stall, then so does the new connection: the
    error names the server and the setting, as every log line of a stalled store shows it."""
    store = Store.open(proxied(postgres_url, proxy), 2, migrate=True, response_timeout_s=2)
    try:
        assert store.last_tick_at() is None
        proxy.stall()
        taken_s, raised = outcome_within(store.last_tick_at)
    finally:
        store.engine.dispose()
    assert isinstance(raised, OperationalError)
    assert (f"no connection to the database server at 127.0.0.1:{proxy.port} within 2 s "
            "(db.connect_timeout_s): it is down, or the network to it stalled") in str(raised)
    assert taken_s < 2 + 2 + 1.5


@pytest.mark.postgres
def test_a_write_on_a_stalled_network_fails_and_the_next_one_lands_once_it_is_back(
        postgres_url: str, proxy: StallProxy) -> None:
    """What the serve loop needs to record a failed tick and retry it: the write fails in
    bounded time, and the store's next write, once the network answers again, lands."""
    store = Store.open(proxied(postgres_url, proxy), 2, migrate=True, response_timeout_s=2)
    try:
        proxy.stall()
        taken_s, raised = outcome_within(lambda: store.upsert_models(DEMO_MODELS))
        assert isinstance(raised, OperationalError)
        assert taken_s < 2 + 2 + 1.5
        proxy.resume()
        store.upsert_models(DEMO_MODELS)
        assert store.model_names() == sorted(spec.name for spec in DEMO_MODELS)
    finally:
        store.engine.dispose()


@pytest.mark.postgres
def test_a_migration_whose_network_stalls_mid_statement_fails_within_the_response_timeout(
        postgres_url: str, proxy: StallProxy) -> None:
    url = proxied(postgres_url, proxy)
    engine = make_engine(url, connect_timeout_s=2, response_timeout_s=2)
    proxy.stall_on(b"CREATE TABLE")
    try:
        taken_s, raised = outcome_within(lambda: upgrade(engine))
    finally:
        engine.dispose()
    assert isinstance(raised, MigrationError)
    assert str(raised).startswith(f"database {url}: cannot upgrade to 'head': ")
    assert f"no answer from the database server at 127.0.0.1:{proxy.port} within 2 s" in str(
        raised)
    assert taken_s < 3.5
    proxy.close()  # the server sees the connection end and rolls the migration back
    direct = create_engine(postgres_url)
    try:
        assert inspect(direct).get_table_names() == []  # nothing half-applied
    finally:
        direct.dispose()


@pytest.mark.postgres
def test_a_response_timeout_sets_libpq_keepalives_and_tcp_user_timeout(
        postgres_url: str) -> None:
    """A real partition (no ACK, no keepalive answer) is also bounded by the kernel, and an
    idle pooled connection to a vanished server is found dead before it is used."""
    engine = make_engine(postgres_url, connect_timeout_s=2, response_timeout_s=9)
    try:
        with engine.connect() as connection:
            params = connection.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
    finally:
        engine.dispose()
    assert {key: params.get(key) for key in ("keepalives", "keepalives_idle",
                                             "keepalives_interval", "keepalives_count",
                                             "tcp_user_timeout")} == {
        "keepalives": "1", "keepalives_idle": "3", "keepalives_interval": "1",
        "keepalives_count": "3", "tcp_user_timeout": "9000"}


@pytest.mark.postgres
def test_the_tcp_settings_a_store_url_gives_win_over_those_derived_from_the_response_timeout(
        postgres_url: str) -> None:
    engine = make_engine(f"{postgres_url}?tcp_user_timeout=5000&keepalives_idle=60",
                         connect_timeout_s=2, response_timeout_s=9)
    try:
        with engine.connect() as connection:
            params = connection.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
    finally:
        engine.dispose()
    assert (params["tcp_user_timeout"], params["keepalives_idle"],
            params["keepalives_interval"]) == ("5000", "60", "1")


def test_a_sqlite_store_opens_and_reads_with_a_response_timeout(sqlite_url: str) -> None:
    store = Store.open(sqlite_url, 2, migrate=True, response_timeout_s=2)
    try:
        assert store.last_tick_at() is None
    finally:
        store.engine.dispose()


def test_the_response_timeout_setting_defaults_to_the_stores_own_default() -> None:
    assert load_settings(None).db.response_timeout_s == DEFAULT_RESPONSE_TIMEOUT_S


@pytest.mark.postgres
def test_alembic_run_by_hand_is_bounded_by_the_db_settings_of_the_environment(
        postgres_url: str, proxy: StallProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """`alembic upgrade head` with an operator's own alembic.ini (no engine handed over): the
    engine env.py opens answers to db.response_timeout_s (HEADROOM_DB__RESPONSE_TIMEOUT_S) as
    Headroom's own, instead of hanging on the stalled network."""
    monkeypatch.setenv("HEADROOM_DB__RESPONSE_TIMEOUT_S", "2")
    monkeypatch.setenv("HEADROOM_DB__CONNECT_TIMEOUT_S", "2")
    url = proxied(postgres_url, proxy).replace("postgresql+psycopg://", "postgresql://")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url)
    proxy.stall_on(b"CREATE TABLE")
    taken_s, raised = outcome_within(lambda: command.upgrade(config, "head"))
    assert isinstance(raised, OperationalError), raised
    assert f"no answer from the database server at 127.0.0.1:{proxy.port} within 2 s" in str(
        raised)
    assert taken_s < 5


@pytest.mark.postgres
def test_alembic_run_by_hand_on_a_plain_postgresql_url_migrates_the_store(
        postgres_url: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url",
                           postgres_url.replace("postgresql+psycopg://", "postgresql://"))
    command.upgrade(config, "head")
    direct = create_engine(postgres_url)
    try:
        assert inspect(direct).has_table("ticks")
    finally:
        direct.dispose()
