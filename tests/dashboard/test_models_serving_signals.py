"""The Models page draws a model's serving signals over its window, each against its limit: the
latency its load source read against the model's latency SLO, its queued requests against 30 s
of its ready capacity and its KV cache usage against 95 % full, with how many readings were over
the line; a signal never read is not drawn, and a store older than the queue and KV cache
columns (migration 0027) still shows the latency. The charts are built from frames (pure) and
rendered by Streamlit's AppTest over copies of a store the real core filled."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from dashboard_support import Seeded, copy_store_at, open_page, with_kv_cache_read
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from controlplane.store.engine import make_engine
from dashboard import signals as sg

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _history(rows: list[tuple[float | None, float | None, float | None]]) -> pd.DataFrame:
    """Observations a minute apart at 10 rps of ready capacity: latency, queue, KV cache."""
    return pd.DataFrame({
        "at": [T0 + timedelta(minutes=i) for i in range(len(rows))],
        "capacity_rps": 10.0,
        "latency_ms": [r[0] for r in rows], "queued_requests": [r[1] for r in rows],
        "kv_cache_usage": [r[2] for r in rows]})


def _signal(column: str) -> sg.Signal:
    return next(s for s in sg.SIGNALS if s.column == column)


def test_readings_over_the_slo_a_30_s_backlog_and_a_95_percent_cache_are_counted_over_the_line(
        ) -> None:
    history = _history([(40.0, 100.0, 0.5), (60.0, 301.0, 0.96), (None, None, None),
                        (50.0, 300.0, 0.95)])
    assert sg.measured(history) == sg.SIGNALS
    latency = sg.signal_frame(history, _signal("latency_ms"), slo_ms=50.0)
    assert list(latency["value"]) == [40.0, 60.0, 50.0]  # the unread minute is left out
    assert sg.over_limit(latency, _signal("latency_ms")) == (
        "1 of 3 readings above the model's latency SLO (red).")
    queue = sg.signal_frame(history, _signal("queued_requests"), slo_ms=50.0)
    assert list(queue["limit"]) == [300.0, 300.0, 300.0]  # 30 s of 10 rps
    assert sg.over_limit(queue, _signal("queued_requests")).startswith("1 of 3 readings above "
                                                                      "30 s of its ready")
    kv = sg.signal_frame(history, _signal("kv_cache_usage"), slo_ms=50.0)
    assert list(kv["value"]) == pytest.approx([50.0, 96.0, 95.0])  # in percent
    assert sg.over_limit(kv, _signal("kv_cache_usage")) == (
        "1 of 3 readings above 95% full (red).")


def test_a_signal_never_read_is_not_drawn_and_a_model_without_an_slo_has_no_latency_line(
        ) -> None:
    history = _history([(40.0, None, None), (70.0, None, None)])
    assert sg.measured(history) == (_signal("latency_ms"),)
    assert sg.measured(history.drop(columns=["queued_requests", "kv_cache_usage"])) == (
        _signal("latency_ms"),)
    unlisted = sg.signal_frame(history, _signal("latency_ms"), slo_ms=None)
    assert all(math.isnan(v) for v in unlisted["limit"])
    assert sg.over_limit(unlisted, _signal("latency_ms")) == (
        "2 readings; no limit known (red: the model's latency SLO).")
    chart = sg.signal_chart(unlisted, _signal("latency_ms")).to_dict()
    marks = [layer["mark"] for layer in chart["layer"]]
    assert [(m["color"], m["point"]["color"]) for m in marks] == [
        ("#222222", "#222222"), ("#e45756", "#e45756")]  # two readings: points, not only a line


def _signal_captions(at: AppTest) -> dict[str, str]:
    """Each drawn signal's title and the caption under its chart."""
    titles = [m.value.strip("*") for m in at.markdown if m.value.startswith("**")]
    captions = [c.value for c in at.caption if "readings" in c.value]
    assert len(titles) == len(captions)
    return dict(zip(titles, captions, strict=True))


def _latency_over_slo(url: str, model: str) -> tuple[int, int]:
    """Of the model's stored observations that read a latency: those above its SLO, all."""
    with make_engine(url).connect() as connection:
        over, read = connection.execute(text(
            "SELECT sum(o.latency_ms > m.latency_slo_ms), count(o.latency_ms) "
            "FROM observations o JOIN models m ON m.name = o.model WHERE o.model = :model"),
            {"model": model}).one()
    return int(over), int(read)


def test_the_simulated_fleets_latency_is_drawn_against_the_slo_with_the_readings_over_it(
        seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    page = open_page(seeded.url, "views/models.py", monkeypatch)
    model = "mistral-7b-support"  # really serves 0.6 x its profile in the sim: over its SLO
    page.selectbox[0].set_value(model).run()
    assert not page.exception
    assert "Serving signals" in [s.value for s in page.subheader]
    over, read = _latency_over_slo(seeded.url, model)
    assert read > 100 and over > 0
    assert _signal_captions(page) == {  # the simulator reads no queue or KV cache
        "Latency": f"{over:,} of {read:,} readings above the model's latency SLO (red)."}


def test_a_queue_and_kv_cache_read_are_drawn_beside_the_latency(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, queued, usage = with_kv_cache_read(seeded.url, tmp_path / "kv.db")
    backlogged, draining = sorted(queued)  # 31 s and 29 s of their capacity
    full = max(usage, key=usage.__getitem__)  # 97 %
    page = open_page(url, "views/models.py", monkeypatch)
    shown = {}
    for model in (backlogged, draining, full):
        page.selectbox[0].set_value(model).run()
        assert not page.exception
        shown[model] = _signal_captions(page)
    assert shown[backlogged]["Queued requests"] == (
        "1 of 1 readings above 30 s of its ready capacity (red).")
    assert "KV cache usage" not in shown[backlogged]
    assert shown[draining]["Queued requests"].startswith("0 of 1 readings")
    assert shown[draining]["KV cache usage"] == "0 of 1 readings above 95% full (red)."
    assert shown[full]["KV cache usage"] == "1 of 1 readings above 95% full (red)."
    assert "Queued requests" not in shown[full]
    assert all("Latency" in captions for captions in shown.values())


def test_a_store_older_than_the_queue_and_kv_cache_columns_still_draws_the_latency(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = copy_store_at(seeded.url, tmp_path / "old.db", "0026")
    page = open_page(url, "views/models.py", monkeypatch)
    assert list(_signal_captions(page)) == ["Latency"]
