"""Scaling an LLM on the tokens it generates rather than its requests: a custom
``prometheus.query`` over vLLM's token counter (the README's) makes every rate the loop reads,
the load each tick and the history the forecasts fit, tokens per second, measured from a real
Prometheus (Debian package, backfilled with promtool); the models' throughput is then tokens
per second per replica, and no request queue is read."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controlplane.adapters.prometheus import PrometheusLoad, prometheus_source
from controlplane.serve_k8s import queue_preset
from controlplane.settings import Settings
from controlplane.settings_cluster import PrometheusSettings
from tests.forecasting.promserver import Family, prometheus

pytestmark = pytest.mark.prometheus
NOW = int(time.time()) // 60 * 60
ROOT = Path(__file__).resolve().parents[2]
MISTRAL = "mistral-7b-support"
TOKENS_QUERY = ('sum(rate(vllm:generation_tokens_total{model_name="{model}"}[{window}]))')
TOKENS_SERIES = 'vllm:generation_tokens_total{model_name="{model}"}'


def counter(per_s: float) -> list[tuple[float, float]]:
    """Growing by ``per_s`` a second from three hours before the test to an hour after it."""
    return [(float(t), per_s * (t - NOW + 3 * 3600))
            for t in range(NOW - 3 * 3600, NOW + 3600, 15)]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """mistral: 12 requests/s of 200 generated tokens each, 2,400 tokens/s; 3 waiting."""
    with prometheus(tmp_path_factory.mktemp("tokens"), [
            Family("vllm:request_success_total", {f'model_name="{MISTRAL}"': counter(12.0)}),
            Family("vllm:generation_tokens_total", {f'model_name="{MISTRAL}"':
                                                    counter(2400.0)}),
            Family("vllm:num_requests_waiting", {f'model_name="{MISTRAL}"':
                                                 [(t, 3.0) for t, _ in counter(0.0)]})]) as url:
        yield url


def test_the_readmes_token_query_makes_load_capacity_and_history_tokens_per_second(
        prom_url: str) -> None:
    readme = (ROOT / "README.md").read_text().replace("\n", "")
    assert TOKENS_QUERY in readme and TOKENS_SERIES in readme
    settings = Settings(prometheus=PrometheusSettings(
        url=prom_url, metric="vllm", query=TOKENS_QUERY, query_sample_series=TOKENS_SERIES))
    assert queue_preset(settings) is None  # requests waiting are not tokens per second
    source = prometheus_source(settings.prometheus)
    # a replica generates 1,000 tokens/s at its latency SLO (its profile's throughput_rps)
    load = PrometheusLoad(source, {MISTRAL: 1000.0}, settings.prometheus.metric,
                          queue_preset=queue_preset(settings))
    now = datetime.fromtimestamp(NOW, UTC)
    (measured,) = load.measure({MISTRAL: 2}, now).values()
    assert measured.demand_rps == pytest.approx(2400.0)
    assert measured.capacity_rps == pytest.approx(2000.0)  # short of the tokens asked for
    assert measured.queued_requests is None
    assert measured.sampled_at is not None and (now - measured.sampled_at).total_seconds() < 60
    history = source.rate_history(MISTRAL, now - timedelta(hours=2), now, 60)
    assert len(history.values) == 120
    assert history.values[10:] == pytest.approx([2400.0] * 110)
