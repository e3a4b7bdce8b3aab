"""The Triton preset's rate is of the requests that arrived, against a real Prometheus (Debian
package): successes plus failures of every reason, so an overloaded model whose queue rejects
requests shows its demand, not its served throughput, to the tick and to the forecast's history;
a model without failure series still reads its successes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from forecaster.sources.prometheus import PrometheusSource
from tests.forecasting.promserver import Family, prometheus

pytestmark = pytest.mark.prometheus
NOW = int(time.time()) // 60 * 60


def counter(rps: float) -> list[tuple[float, float]]:
    """A counter growing at ``rps`` for the hour up to NOW, scraped every 15 s."""
    return [(float(t), rps * (t - NOW + 3600)) for t in range(NOW - 3600, NOW + 1, 15)]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    families = [
        Family("nv_inference_request_success", {
            'model="llama",version="1"': counter(60),  # 100 req/s arrive, 40 fail
            'model="quiet",version="1"': counter(7),  # no failure series at all
            'model="plain",version="1"': counter(5)}),  # failures without a reason label
        Family("nv_inference_request_failure", {
            'model="llama",version="1",reason="REJECTED"': counter(30),  # queue full
            'model="llama",version="1",reason="BACKEND"': counter(10),
            'model="plain",version="1"': counter(2)}),
    ]
    with prometheus(tmp_path_factory.mktemp("arrivals"), families) as url:
        yield url


def at(t: int) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def history(src: PrometheusSource, model: str) -> tuple[float, ...]:
    until = at(NOW)
    return src.read_history(model, until - timedelta(minutes=30), until, 600).series.values


def test_the_current_rate_of_an_overloaded_triton_model_counts_the_requests_it_rejected(
        prom_url: str) -> None:
    got = PrometheusSource(prom_url, "triton").current_rates(["llama"], at(NOW))
    assert got.rates == {"llama": pytest.approx(100.0)}
    assert got.unknown == {}


def test_the_history_of_an_overloaded_triton_model_counts_the_requests_it_rejected(
        prom_url: str) -> None:
    assert history(PrometheusSource(prom_url, "triton"), "llama") == \
        pytest.approx((100.0, 100.0, 100.0))


def test_a_triton_model_without_failure_series_reads_its_successes(prom_url: str) -> None:
    src = PrometheusSource(prom_url, "triton")
    assert src.current_rates(["quiet"], at(NOW)).rates == {"quiet": pytest.approx(7.0)}
    assert history(src, "quiet") == pytest.approx((7.0, 7.0, 7.0))


def test_failures_labelled_as_the_successes_are_added_not_dropped(prom_url: str) -> None:
    src = PrometheusSource(prom_url, "triton")
    assert src.current_rates(["plain"], at(NOW)).rates == {"plain": pytest.approx(7.0)}
    assert history(src, "plain") == pytest.approx((7.0, 7.0, 7.0))

