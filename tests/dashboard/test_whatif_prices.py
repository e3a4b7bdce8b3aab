"""The What-if page prices GPU-hours at the store's configured price of the chosen product, with
its source shown, and at the list price (saying so) when the store has none or cannot be read."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dashboard_support import write_timeline
from streamlit.testing.v1 import AppTest

from controlplane.domain.desired import PoolSpec
from controlplane.store import Store

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
GPU_HOURS = 30 * 8 / 60  # the static timeline below: 8 GPUs billed for 30 minutes
NEGOTIATED_USD = 3.25  # the store's A100-80GB price (list: 5.12)


def _what_if(url: str, timelines: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/whatif.py").run()
    at.text_area[0].set_value(str(timelines)).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _dollars(at: AppTest) -> float:
    return float(at.dataframe[0].value.set_index("policy").loc["static", "$"])


@pytest.fixture
def priced_store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'priced.db'}"
    store = Store.open(url, migrate=True)
    store.upsert_prices([PoolSpec("a100", "A100-80GB", 8, 0, 4, NEGOTIATED_USD)],
                        datetime(2026, 11, 30, 9, tzinfo=UTC))
    store.engine.dispose()
    return url


def test_what_if_prices_at_the_stores_configured_price_and_names_its_source(
        priced_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timeline = write_timeline(tmp_path / "static.csv", minutes=30, replicas=6, gpus_billed=8)
    at = _what_if(priced_store, timeline, monkeypatch)
    assert _dollars(at) == pytest.approx(round(GPU_HOURS * NEGOTIATED_USD, 2))
    (shown,) = [m for m in at.metric if m.label == "$ per GPU-hour"]
    assert (shown.value, shown.delta) == ("$3.250", "store price")
    assert [c.value for c in at.caption if c.value.startswith("The store's")] == [
        "The store's configured price for A100-80GB (source: settings "
        "pools[a100].price_per_gpu_hour; as of 2026-11-30)."]


def test_a_product_the_store_does_not_price_is_priced_at_its_list_price_saying_so(
        priced_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timeline = write_timeline(tmp_path / "static.csv", minutes=30, replicas=6, gpus_billed=8)
    at = _what_if(priced_store, timeline, monkeypatch)
    at.selectbox[0].set_value("H100-80GB").run()
    assert _dollars(at) == pytest.approx(round(GPU_HOURS * 6.88, 2))
    assert [c.value for c in at.caption if c.value.startswith("List price")] == [
        "List price for H100-80GB: the store has no configured price for H100-80GB (source: "
        "REFERENCE.md §10.1: AWS p5.48xlarge / 8 after the June 2025 cut; as of 2025-06)."]


def test_without_a_store_the_page_still_compares_at_list_prices_and_creates_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timeline = write_timeline(tmp_path / "static.csv", minutes=30, replicas=6, gpus_billed=8)
    missing = tmp_path / "none.db"
    at = _what_if(f"sqlite:///{missing}", timeline, monkeypatch)
    assert _dollars(at) == pytest.approx(round(GPU_HOURS * 5.12, 2))
    assert [c.value for c in at.caption if c.value.startswith("List price")] == [
        f"List price for A100-80GB: there is no store file at {missing} (source: REFERENCE.md "
        "§10.1: AWS p4de.24xlarge / 8 on-demand; as of 2024-25)."]
    assert not missing.exists()


def test_a_store_without_the_schema_is_named_and_list_prices_are_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timeline = write_timeline(tmp_path / "static.csv", minutes=30, replicas=6, gpus_billed=8)
    bare = tmp_path / "bare.db"
    sqlite3.connect(bare).close()  # a SQLite file without Headroom's tables
    at = _what_if(f"sqlite:///{bare}", timeline, monkeypatch)
    assert _dollars(at) == pytest.approx(round(GPU_HOURS * 5.12, 2))
    assert [c.value for c in at.caption if c.value.startswith("List price")] == [
        f"List price for A100-80GB: the store at sqlite:///{bare} cannot be read (no such table: "
        "gpu_prices) (source: REFERENCE.md §10.1: AWS p4de.24xlarge / 8 on-demand; as of "
        "2024-25)."]
