"""History steps and current rates against a real Prometheus (Debian package) with a backfilled
counter whose increase per 10 minutes is known: a step's value is that step's mean rate, and a
model Prometheus cannot measure now is unknown, never 0."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from forecaster.errors import SourceError
from forecaster.sources.prometheus import PrometheusSource
from forecaster.sources.promql import PRESETS
from tests.forecasting.promserver import Family, free_port, prometheus

pytestmark = pytest.mark.prometheus
END = int(time.time()) // 3600 * 3600 - 3600  # whole hour, an hour ago
START = END - 6 * 3600
NOW = int(time.time())
LIVE_RPS = 7.5


def block_rps(t: int) -> float:
    """The counter's rate, constant over each 10-minute block from START: 4, 7, 10, 13, 16."""
    return 4.0 + 3.0 * (((t - START) // 600) % 5)


def blocks_counter() -> list[tuple[float, float]]:
    total, out = 0.0, []
    for t in range(START, END + 1, 15):
        out.append((float(t), total))
        total += block_rps(t) * 15
    return out


def live_counter() -> list[tuple[float, float]]:
    """LIVE_RPS from an hour before the test to an hour after it (Prometheus answers "now")."""
    return [(float(t), LIVE_RPS * (t - NOW + 3600)) for t in range(NOW - 3600, NOW + 3600, 15)]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    families = [Family("nv_inference_request_success", {
        'model="blocks",version="1"': blocks_counter(),
        'model="live",version="1"': live_counter(),
        'model="live",version="2"': live_counter()})]
    with prometheus(tmp_path_factory.mktemp("steps"), families) as url:
        yield url


def at(t: int) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def test_a_600_s_step_reads_the_mean_rate_of_its_own_ten_minutes(prom_url: str) -> None:
    since = START + 3600
    src = PrometheusSource(prom_url, preset="triton", models=["blocks"])
    series = src.rate_history("blocks", at(since), at(since + 3 * 3600), 600)
    assert series.start_at == at(since) and len(series.values) == 18
    # each block's increase over its 600 s, not a 2-minute sample at the step's start (which
    # would read the block before)
    assert list(series.values) == pytest.approx(
        [block_rps(since + 600 * i) for i in range(18)], rel=1e-9)


def test_a_60_s_step_reads_the_mean_rate_of_its_own_minute(prom_url: str) -> None:
    since = START + 3600
    src = PrometheusSource(prom_url, preset="triton", models=["blocks"], rate_window_s=60)
    series = src.rate_history("blocks", at(since), at(since + 3600), 60)
    assert list(series.values) == pytest.approx(
        [block_rps(since + 60 * i) for i in range(60)], rel=1e-9)


def test_a_custom_query_with_a_window_placeholder_is_read_at_the_steps_end(
        prom_url: str) -> None:
    since = START + 3600
    src = PrometheusSource(prom_url, query='sum(rate(nv_inference_request_success'
                                           '{model="{model}"}[{window}]))', models=["blocks"])
    assert src.query_for("blocks", 600) == \
        'sum(rate(nv_inference_request_success{model="blocks"}[600s]))'
    series = src.rate_history("blocks", at(since), at(since + 3600), 600)
    assert list(series.values) == pytest.approx(
        [block_rps(since + 600 * i) for i in range(6)], rel=1e-9)


def test_current_rates_read_each_models_rate_now_and_name_the_ones_without_series(
        prom_url: str) -> None:
    src = PrometheusSource(prom_url, preset="triton")
    got = src.current_rates(["live", "ghost"], at(int(time.time())))
    assert got.rates == {"live": pytest.approx(2 * LIVE_RPS)}  # two versions, summed
    assert got.unknown == {"ghost": f"Prometheus at {prom_url} returned no series for model "
                                    f"'ghost' (query {PRESETS['triton'].grouped(120)})"}


def test_current_rates_of_a_custom_query_ask_per_model(prom_url: str) -> None:
    src = PrometheusSource(prom_url, query='sum(rate(nv_inference_request_success'
                                           '{model="{model}",version="1"}[{window}]))',
                           models=["live", "ghost"], rate_window_s=60)
    got = src.current_rates(["live", "ghost"], at(int(time.time())))
    assert got.rates == {"live": pytest.approx(LIVE_RPS)}
    assert list(got.unknown) == ["ghost"]


def test_current_rates_of_a_stopped_prometheus_are_unknown_within_the_timeout() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    src = PrometheusSource(url, query='sum(rate(x{model="{model}"}[{window}]))',
                           models=["a", "b", "c"], timeout_s=2)
    started = time.monotonic()
    got = src.current_rates(["a", "b", "c"], at(int(time.time())))
    assert time.monotonic() - started < 4  # asked once, not retried, not once per model
    assert got.rates == {}
    assert sorted(got.unknown) == ["a", "b", "c"]
    assert got.unknown["a"].startswith(f"Prometheus at {url} is unreachable")
    assert got.unknown["b"] == got.unknown["c"] == \
        f"not asked, an earlier request failed: {got.unknown['a']}"


def test_a_rate_window_under_a_second_is_refused() -> None:
    with pytest.raises(SourceError, match="rate window 0 s: must be at least 1 s"):
        PrometheusSource("http://127.0.0.1:9", rate_window_s=0)


def test_an_unreachable_prometheus_is_named_with_the_connection_error_not_a_clipped_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    src = PrometheusSource(url, preset="triton", timeout_s=2)
    got = src.current_rates(["a"], at(int(time.time())))
    # the long query URL of the requests error used to fill the message and cut its cause off
    assert got.unknown["a"].startswith(f"Prometheus at {url} is unreachable (")
    assert got.unknown["a"].endswith("Connection refused)")
    assert "query?query=" not in got.unknown["a"]
