"""The dashboard's Cost page and `headroom cost export` bill the same window alike and exactly:
each recorded plan held from its tick until the next, a price change from its exact time, a
plan however short-lived counted; both take the same default window (ending at the last tick),
and the page names the export command that reproduces its figures.

The store: 4 h of ticks every 5 min from 22:00 UTC (across midnight), an L4 pool of 2, 3, 1 and
2 nodes x 4 GPUs in the four hours, bert-embed serving 500 rps on one of its GPUs, and the L4
price changed from $0.80 to $1.60 at 23:37:30, between two ticks."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dashboard_support import bert_on_one_l4_tick
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from controlplane import cost_export, cost_reader
from controlplane.cli.cost import app as cost_app
from controlplane.domain.desired import PoolSpec
from controlplane.domain.tick import TickReport
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.engine import make_engine
from dashboard import costing

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
BERT = next(s for s in DEMO_MODELS if s.name == "bert-embed")
SINCE_AT = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)
UNTIL_AT = SINCE_AT + timedelta(hours=4)  # the last tick
TICK_S = 300
NODES_BY_HOUR = (2, 3, 1, 2, 2)  # the last entry: the last tick's, held for no time
PRICE_CHANGED_AT = SINCE_AT + timedelta(hours=1, minutes=37, seconds=30)
EXACT_USD = (8 * 0.80 * 1 + 12 * 0.80 * (37.5 / 60) + 12 * 1.60 * (22.5 / 60)
             + 4 * 1.60 * 1 + 8 * 1.60 * 1)


def _l4(usd_per_gpu_hour: float) -> list[PoolSpec]:
    return [PoolSpec("l4", "L4", 4, 0, 4, usd_per_gpu_hour)]


def _tick(at: datetime, nodes: int) -> TickReport:
    return bert_on_one_l4_tick(at, nodes, 500.0)


def _seed(url: str) -> None:
    store = Store.open(url, migrate=True)
    store.upsert_models([BERT])
    store.upsert_prices(_l4(0.80), SINCE_AT - timedelta(hours=1))
    store.upsert_prices(_l4(1.60), PRICE_CHANGED_AT)
    at = SINCE_AT
    while at <= UNTIL_AT:
        report = _tick(at, NODES_BY_HOUR[int((at - SINCE_AT) / timedelta(hours=1))])
        store.save_tick(report)
        store.save_observed(report.observed)
        at += timedelta(seconds=TICK_S)
    store.engine.dispose()


def _csv_sums(text: str) -> tuple[float, float]:
    """(TotalCost, Requests) summed over a showback CSV's rows."""
    rows = list(csv.DictReader(io.StringIO(text)))
    return (sum(float(r["TotalCost"]) for r in rows),
            sum(float(r["Requests"]) for r in rows if r["Requests"]))


def _export(tmp_path: Path, name: str, *args: str) -> tuple[float, float]:
    out = tmp_path / name
    result = CliRunner().invoke(cost_app, ["export", "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return _csv_sums(out.read_text())


def test_the_cost_page_and_the_export_bill_a_price_change_between_ticks_exactly(
        store_url: str) -> None:
    _seed(store_url)
    window = costing.cost_window(store_url, SINCE_AT, UNTIL_AT)
    page_usd = float(window.accruals["usd"].sum())
    engine = make_engine(store_url)
    exact = cost_export.showback(engine, cost_reader.price_history(engine), SINCE_AT, UNTIL_AT)
    engine.dispose()
    # 22:00, 22:05, ..., 01:55: the tick at the window's end accrues nothing, counted by neither
    assert window.samples == exact.samples == 48
    assert page_usd == pytest.approx(sum(a.usd for a in exact.accruals), rel=1e-12)
    assert page_usd == pytest.approx(EXACT_USD, rel=1e-12)


def test_the_exports_default_window_is_the_cost_pages_and_counts_the_same_requests(
        store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(store_url)
    monkeypatch.setenv("HEADROOM_DB__URL", store_url)
    # the page's default window: 7 days ending at the last tick, from the first tick here
    window = costing.cost_window(store_url, SINCE_AT, UNTIL_AT)
    page_usd, page_requests = _csv_sums(costing.export_csv(
        store_url, window.accruals, SINCE_AT, UNTIL_AT, window.unrecorded))
    export_usd, export_requests = _export(tmp_path, "default.csv")
    assert export_requests == pytest.approx(page_requests, rel=1e-9)
    assert export_requests == pytest.approx(500.0 * 4 * 3600, rel=1e-9)
    assert round(export_usd, 2) == round(page_usd, 2) == round(EXACT_USD, 2)


def test_the_export_of_a_store_with_one_tick_says_cost_accrues_from_the_next_and_writes_nothing(
        store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(store_url, migrate=True)
    store.save_tick(_tick(SINCE_AT, 2))
    store.engine.dispose()
    monkeypatch.setenv("HEADROOM_DB__URL", store_url)
    out = tmp_path / "one.csv"
    result = CliRunner().invoke(cost_app, ["export", "--out", str(out)])
    assert result.exit_code == 1
    assert ("has one reconcile tick so far; cost accrues from one tick to the next: nothing to "
            "export yet") in " ".join(result.output.split())
    assert not out.exists()


def test_the_cost_page_names_the_export_command_that_reproduces_its_total(
        store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(store_url)
    monkeypatch.setenv("HEADROOM_DB__URL", store_url)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/cost.py").run()
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    named = re.search(r"`headroom cost export --out showback\.csv ([^`]*)`", captions)
    assert named is not None, captions
    assert named.group(1) == "--until 2026-03-03T02:00:00Z --days 7"
    assert "Each plan recorded (48 in this window) is held from its tick until the next" in captions
    page_total = next(str(m.value) for m in at.metric if m.label == "Total")
    export_usd, _ = _export(tmp_path, "named.csv", *named.group(1).split())
    assert f"${export_usd:,.2f}" == page_total


BURST_AT = SINCE_AT + timedelta(hours=1, minutes=5)  # 6 nodes, not 2, for two ticks: 10 minutes
BURST_USD = 8 * 0.80 * 4 + 16 * 0.80 * (10 / 60)


def _seed_burst(url: str) -> None:
    """bert-embed on an L4 pool of 2 nodes, 6 in a burst from 23:05 to 23:15: shorter than the
    20 minutes the page sampled a 4-hour window at, and between two of its samples."""
    store = Store.open(url, migrate=True)
    store.upsert_models([BERT])
    store.upsert_prices(_l4(0.80), SINCE_AT - timedelta(hours=1))
    at = SINCE_AT
    while at <= UNTIL_AT:
        burst = BURST_AT <= at < BURST_AT + timedelta(minutes=10)
        report = _tick(at, 6 if burst else 2)
        store.save_tick(report)
        store.save_observed(report.observed)
        at += timedelta(seconds=TICK_S)
    store.engine.dispose()


def test_the_cost_page_bills_a_burst_shorter_than_its_old_sampling_step_as_the_export_does(
        store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _seed_burst(store_url)
    monkeypatch.setenv("HEADROOM_DB__URL", store_url)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/cost.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert next(str(m.value) for m in at.metric if m.label == "Total") == f"${BURST_USD:,.2f}"
    export_usd, _ = _export(tmp_path, "burst.csv")
    assert export_usd == pytest.approx(BURST_USD, abs=1e-4)
    # bert-embed's $ per 1M requests: the page's and its CSV's (all its rows, both days) alike
    rows = [r for r in csv.DictReader(io.StringIO((tmp_path / "burst.csv").read_text()))
            if r["ControllerName"] == "bert-embed"]
    csv_per_million = (sum(float(r["TotalCost"]) for r in rows)
                       / sum(float(r["Requests"]) for r in rows) * 1e6)
    models = at.dataframe[1].value.set_index("model")
    assert models.loc["bert-embed", "$ per 1M requests"] == round(csv_per_million, 3)
