"""$ per 1M requests over a tick whose load could not be measured (Prometheus missed a scrape:
the tick stores no observation and a placeholder 0 in its snapshot): the Cost page counts
requests from the observations, as the CSV does, so that tick does not count the model as
serving nothing until the next one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from dashboard_support import bert_on_one_l4_tick

from controlplane.domain.cost import cost_per_million
from controlplane.domain.tick import TickReport
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from dashboard import costing

BERT = next(s for s in DEMO_MODELS if s.name == "bert-embed")
SINCE_AT = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)  # the window crosses midnight
UNTIL_AT = SINCE_AT + timedelta(hours=4)
TICK_S = 300
SERVED_RPS = 500.0  # demand 500 rps, capacity 600: all served
BLIP_AT = SINCE_AT + timedelta(hours=1)


def _tick(at: datetime, measured: bool) -> TickReport:
    """bert-embed on one L4 of a pool of 2 nodes x 4 GPUs; its load unmeasured unless
    ``measured`` (demand_rps then the loop's placeholder 0)."""
    return bert_on_one_l4_tick(at, 2, SERVED_RPS, measured)


def _store(url: str, unmeasured_at: datetime | None) -> None:
    store = Store.open(url, migrate=True)
    store.upsert_models([BERT])
    at = SINCE_AT
    while at <= UNTIL_AT:
        report = _tick(at, measured=at != unmeasured_at)
        store.save_tick(report)
        store.save_observed(report.observed)  # no observation row for an unmeasured model
        at += timedelta(seconds=TICK_S)
    store.engine.dispose()


def _per_million(url: str) -> float:
    window = costing.cost_window(url, SINCE_AT, UNTIL_AT)
    per_million = cost_per_million(float(window.accruals["usd"].sum()),
                                   float(window.requests["served_requests"].sum()))
    assert per_million is not None
    return per_million


def test_an_unmeasured_tick_leaves_cost_per_million_requests_as_it_was(
        store_url: str) -> None:
    _store(store_url, unmeasured_at=BLIP_AT)
    billed_usd = 8 * 0.80 * 4  # 8 L4 GPUs at the default $0.80/h for 4 h
    exact = billed_usd / (SERVED_RPS * 4 * 3600) * 1e6
    # the unmeasured tick has no observation: the measured ones stand in for it
    assert _per_million(store_url) == pytest.approx(exact, rel=0.002)
