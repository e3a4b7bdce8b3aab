"""`headroom serve` with `backend: kubernetes` while its PostgreSQL store is down (its database
refuses connections, the ones open are terminated): the leader's tick fails on one line naming
the store, counts as a failed tick and acts on nothing; a follower's tick says it could not
sync on one line; neither raises into the scheduler (which logs a traceback per job, twice, every
tick of the outage); the first tick after the outage reconciles and is saved."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from apiserver import ApiServer
from k8s_builders import k8s_settings
from k8s_harness import FixedLoads, make_backend
from prometheus_client import CollectorRegistry
from relayout_scenario import seed
from sqlalchemy import create_engine, make_url, text

from controlplane.adapters.placement import LocalPlacementClient
from controlplane.decision_retry import RetryingDecisionStore
from controlplane.domain.observed import ModelLoad
from controlplane.domain.tick import TickStatus
from controlplane.metrics import ControlPlaneMetrics
from controlplane.placement_api import journaled_engine
from controlplane.reconcile import ReconcileDeps
from controlplane.reconcile_config import reconcile_config
from controlplane.serve_k8s import follow, leader_tick
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.ledger import SqlForecastLedger
from controlplane.store.relayout import SqlRelayoutStore
from tests.conftest import PG_ADMIN_URL
from tests.restart_scenario import CHAT

STORE_UNAVAILABLE = "store_unavailable"


class Outage:
    """Takes the store's database down (no new connection; the open ones terminated) and up."""

    def __init__(self, url: str) -> None:
        self.name = make_url(url).database
        self.admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")

    def _allow(self, allowed: bool) -> None:
        with self.admin.connect() as connection:
            connection.execute(text(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS '
                                    f'{str(allowed).lower()}'))
            if not allowed:
                connection.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                        "WHERE datname = :name"), {"name": self.name})

    def begin(self) -> None:
        self._allow(False)

    def end(self) -> None:
        self._allow(True)


@pytest.fixture
def outage(postgres_url: str) -> Iterator[Outage]:
    down = Outage(postgres_url)
    yield down
    down.end()  # before the fixture's DROP DATABASE
    down.admin.dispose()


def _event_records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == event]


def test_a_store_outage_fails_the_leaders_tick_on_one_line_and_the_next_tick_reconciles(
        apiserver: ApiServer, clock: VirtualClock, postgres_url: str, outage: Outage,
        caplog: pytest.LogCaptureFixture) -> None:
    seed(apiserver)
    store = Store.open(postgres_url, migrate=True)
    store.upsert_models((CHAT,))
    backend = make_backend(apiserver, clock, relayouts=SqlRelayoutStore(store.engine),
                           load=FixedLoads({CHAT.name: ModelLoad(10.0, 10.0)}))
    placement = LocalPlacementClient(journaled_engine(store, clock))
    deps = ReconcileDeps(clock=clock, reader=backend.reader, node_pools=backend.node_pools,
                         replicas=backend.replicas, placement=placement, forecasts=store,
                         decisions=RetryingDecisionStore(store), history=store,
                         ledger=SqlForecastLedger(store.engine), sharing=backend.sharing,
                         mig=backend.mig)
    config = reconcile_config(k8s_settings(), (CHAT,))
    registry = CollectorRegistry()
    metrics = ControlPlaneMetrics(registry)
    assert backend.elector.try_acquire_or_renew(clock.now())
    assert leader_tick(deps, config, backend.mig, metrics).report.status is TickStatus.APPLIED

    outage.begin()
    clock.advance(30)
    assert backend.elector.try_acquire_or_renew(clock.now())
    writes_before = len(apiserver.writes())
    caplog.clear()
    with caplog.at_level(logging.INFO):
        failed = leader_tick(deps, config, backend.mig, metrics)  # raises nothing
        followed = follow(backend.reader.without_load(), placement)
    assert failed.report.status is TickStatus.FAILED
    assert failed.report.reason == STORE_UNAVAILABLE and failed.report.plan is None
    assert registry.get_sample_value("headroom_reconcile_ticks_total",
                                     {"status": "failed"}) == 1.0
    assert registry.get_sample_value("headroom_reconcile_unsaved_ticks_total") == 0.0
    assert len(apiserver.writes()) == writes_before  # it acted on nothing
    [line] = _event_records(caplog, "tick.failed")
    assert line.levelno == logging.ERROR and line.exc_info is None
    assert line.__dict__["reason"] == STORE_UNAVAILABLE
    assert line.__dict__["error"].strip() and "\n" not in line.__dict__["error"]
    assert followed is False
    [unsynced] = _event_records(caplog, "tick.follower_unsynced")
    assert unsynced.levelno == logging.WARNING and unsynced.exc_info is None

    outage.end()
    clock.advance(30)
    assert backend.elector.try_acquire_or_renew(clock.now())
    after = leader_tick(deps, config, backend.mig, metrics)
    assert after.saved and after.report.status is TickStatus.APPLIED
    assert store.counts()["ticks"] == 2  # the failed tick left no record; the next one did
    assert follow(backend.reader.without_load(), placement) is True
