"""Scaling an LLM on the tokens it generates rather than its requests: a custom
``prometheus.query`` over vLLM's token counter (the README's) makes every rate the loop reads,
the load each tick and the history the forecasts fit, tokens per second, measured from a real
Prometheus (Debian package, backfilled with promtool); the models' throughput is then tokens
per second per replica, and no request queue is read. ``prometheus.model_queries`` does the same
for one model of a fleet whose other models stay on the preset's requests."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controlplane.adapters.prometheus import PrometheusLoad, prometheus_source
from controlplane.serve_k8s import queue_preset
from controlplane.settings import Settings
from controlplane.settings_cluster import ModelQuerySettings, PrometheusSettings
from tests.forecasting.promserver import Family, Silent, counter_samples, prometheus

pytestmark = pytest.mark.prometheus
NOW = int(time.time()) // 60 * 60
ROOT = Path(__file__).resolve().parents[2]
MISTRAL = "mistral-7b-support"
QWEN = "qwen-2-7b-chat"
TOKENS_QUERY = ('sum(rate(vllm:generation_tokens_total{model_name="{model}"}[{window}]))')
TOKENS_SERIES = 'vllm:generation_tokens_total{model_name="{model}"}'


def counter(per_s: float) -> list[tuple[float, float]]:
    """Growing by ``per_s`` a second from three hours before the test to an hour after it."""
    return counter_samples(per_s, NOW, since_s=3 * 3600)


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """mistral: 12 requests/s of 200 generated tokens each, 2,400 tokens/s; 3 waiting.
    qwen: 5 requests/s of 100 tokens, 500 tokens/s; 7 waiting."""
    with prometheus(tmp_path_factory.mktemp("tokens"), [
            Family("vllm:request_success_total", {f'model_name="{MISTRAL}"': counter(12.0),
                                                  f'model_name="{QWEN}"': counter(5.0)}),
            Family("vllm:generation_tokens_total", {f'model_name="{MISTRAL}"':
                                                    counter(2400.0),
                                                    f'model_name="{QWEN}"': counter(500.0)}),
            Family("vllm:num_requests_waiting", {
                f'model_name="{MISTRAL}"': [(t, 3.0) for t, _ in counter(0.0)],
                f'model_name="{QWEN}"': [(t, 7.0) for t, _ in counter(0.0)]})]) as url:
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


def _mixed(prom_url: str, sample_series: str | None) -> Settings:
    """vLLM's request preset for the fleet, and mistral's own query over its tokens."""
    return Settings(prometheus=PrometheusSettings(
        url=prom_url, metric="vllm", model_queries={MISTRAL: ModelQuerySettings(
            query=TOKENS_QUERY, sample_series=sample_series)}))


def test_a_model_with_its_own_query_scales_on_tokens_while_the_others_stay_on_requests(
        prom_url: str) -> None:
    settings = _mixed(prom_url, TOKENS_SERIES)
    assert queue_preset(settings) == "vllm"  # the fleet's queues are still read
    source = prometheus_source(settings.prometheus)
    load = PrometheusLoad(source, {MISTRAL: 1000.0, QWEN: 4.0}, settings.prometheus.metric,
                          queue_preset=queue_preset(settings))
    now = datetime.fromtimestamp(NOW, UTC)
    loads = load.measure({MISTRAL: 2, QWEN: 1}, now)
    assert loads[MISTRAL].demand_rps == pytest.approx(2400.0)  # tokens/s
    assert loads[MISTRAL].capacity_rps == pytest.approx(2000.0)
    assert loads[QWEN].demand_rps == pytest.approx(5.0)  # requests/s, the preset's
    assert loads[QWEN].capacity_rps == pytest.approx(4.0)
    # requests waiting are not tokens: read for qwen only, though mistral's gauge exists
    assert loads[QWEN].queued_requests == pytest.approx(7.0)
    assert loads[MISTRAL].queued_requests is None and loads[MISTRAL].queue_growth_rps is None
    for model in (MISTRAL, QWEN):  # both dated: the preset's counter, mistral's token series
        sampled_at = loads[model].sampled_at
        assert sampled_at is not None and (now - sampled_at).total_seconds() < 60
        assert loads[model].undated_why == ""
    # the forecasts fit each model in its own unit
    since = now - timedelta(hours=2)
    assert source.rate_history(MISTRAL, since, now, 60).values[10:] == pytest.approx(
        [2400.0] * 110)
    assert source.rate_history(QWEN, since, now, 60).values[10:] == pytest.approx([5.0] * 110)
    assert source.model_names() == [MISTRAL, QWEN]


def test_a_models_own_query_without_a_sample_series_is_undated_and_said_so_at_start(
        prom_url: str, caplog: pytest.LogCaptureFixture) -> None:
    settings = _mixed(prom_url, None)
    with caplog.at_level(logging.WARNING, logger="headroom.prometheus"):
        load = PrometheusLoad(prometheus_source(settings.prometheus),
                              {MISTRAL: 1000.0, QWEN: 4.0}, settings.prometheus.metric)
    (warned,) = [r for r in caplog.records if r.getMessage() == "load.undated"]
    assert warned.__dict__["models"] == [MISTRAL]
    loads = load.measure({MISTRAL: 2, QWEN: 1}, datetime.fromtimestamp(NOW, UTC))
    assert loads[MISTRAL].demand_rps == pytest.approx(2400.0)
    assert loads[MISTRAL].sampled_at is None
    assert "prometheus.model_queries" in loads[MISTRAL].undated_why
    assert loads[QWEN].sampled_at is not None and loads[QWEN].undated_why == ""


def test_a_prometheus_that_does_not_answer_a_models_own_query_is_not_asked_for_the_others(
        ) -> None:
    silent = Silent()
    try:
        settings = Settings(prometheus=PrometheusSettings(
            url=silent.url, metric="vllm", timeout_s=0.5,
            model_queries={MISTRAL: ModelQuerySettings(query=TOKENS_QUERY)}))
        load = PrometheusLoad(prometheus_source(settings.prometheus),
                              {MISTRAL: 1000.0, QWEN: 4.0}, "vllm",
                              queue_preset=queue_preset(settings))
        loads = load.measure({MISTRAL: 1, QWEN: 1}, datetime.fromtimestamp(NOW, UTC))
        assert len(silent.held) == 1  # mistral's own query; the preset's was not sent
        assert loads[MISTRAL].demand_rps is None and loads[QWEN].demand_rps is None
        assert loads[QWEN].why.startswith("not asked, an earlier request failed")
    finally:
        silent.close()
