"""Each model's request latency from a real Prometheus (Debian package, backfilled with
promtool): the mean (Triton's request duration over its successes, vLLM's e2e latency histogram
sum over count) or a quantile of vLLM's histogram, one grouped query per tick, or a configured
query; a latency it cannot read is None and never costs
the model its measured load."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from controlplane.adapters.prometheus import PrometheusLoad, prometheus_source
from controlplane.settings_cluster import PrometheusSettings
from tests.forecasting.promserver import (
    Family,
    Silent,
    counter_samples,
    free_port,
    gauge_samples,
    prometheus,
)

pytestmark = pytest.mark.prometheus
NOW = int(time.time())
ROOT = Path(__file__).resolve().parents[2]
LLAMA, BERT, MISTRAL, SILENT = "llama-3-8b-chat", "bert-embed", "mistral-7b-support", "idle"


counter = partial(counter_samples, now_s=NOW)  # an hour before the test to an hour after
gauge = partial(gauge_samples, now_s=NOW)


def families() -> list[Family]:
    """Triton: llama at 30 rps and 120 ms, bert at 50 rps with no duration series, an idle
    model with 0 rps (0 / 0); vLLM: mistral at 12 rps and 640 ms."""
    return [
        Family("nv_inference_request_success", {
            f'model="{LLAMA}",version="1"': counter(30.0),
            f'model="{BERT}",version="1"': counter(50.0),
            f'model="{SILENT}",version="1"': counter(0.0)}),
        Family("nv_inference_request_duration_us", {
            f'model="{LLAMA}",version="1"': counter(30.0 * 120_000),
            f'model="{SILENT}",version="1"': counter(0.0)}),
        Family("vllm:request_success_total", {f'model_name="{MISTRAL}"': counter(12.0)}),
        Family("vllm:e2e_request_latency_seconds_sum", {f'model_name="{MISTRAL}"':
                                                        counter(12.0 * 0.64)}),
        Family("vllm:e2e_request_latency_seconds_count", {f'model_name="{MISTRAL}"':
                                                          counter(12.0)}),
        # requests waiting now: llama's two Triton pods hold 3 and 5 (the second's queue
        # growing by 0.5 a second), mistral's vLLM 12
        Family("nv_inference_pending_request_count", {
            f'model="{LLAMA}",version="1",pod="llama-0"': gauge(3.0),
            f'model="{LLAMA}",version="1",pod="llama-1"': gauge(5.0, per_s=0.5)}),
        Family("vllm:num_requests_waiting", {f'model_name="{MISTRAL}"': gauge(12.0)}),
        # mistral's first tokens: 80 % within 0.1 s, all within 0.5 s
        Family("vllm:time_to_first_token_seconds_bucket", {
            f'model_name="{MISTRAL}",le="{le}"': counter(12.0 * share)
            for le, share in (("0.1", 0.8), ("0.5", 1.0), ("+Inf", 1.0))}),
        # mistral's requests: half within 0.5 s, 90 % within 1 s, all within 2.5 s
        Family("vllm:e2e_request_latency_seconds_bucket", {
            f'model_name="{model}",le="{le}"': counter(rps * share)
            for model, rps in ((MISTRAL, 12.0), (SILENT, 0.0))
            for le, share in (("0.5", 0.5), ("1.0", 0.9), ("2.5", 1.0), ("+Inf", 1.0))}),
    ]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prometheus(tmp_path_factory.mktemp("latency"), families()) as url:
        yield url


def _load(settings: PrometheusSettings, queue: bool = False) -> PrometheusLoad:
    return PrometheusLoad(prometheus_source(settings), {LLAMA: 40.0, BERT: 300.0, MISTRAL: 18.0},
                          settings.metric, settings.latency_query, settings.latency_quantile,
                          settings.metric if queue else None)


def _at() -> datetime:
    return datetime.fromtimestamp(NOW, UTC)


def test_triton_mean_latency_is_request_duration_over_successes_in_ms(prom_url: str) -> None:
    loads = _load(PrometheusSettings(url=prom_url)).measure({LLAMA: 2, BERT: 1, SILENT: 1},
                                                           _at())
    assert loads[LLAMA].demand_rps == pytest.approx(30.0)
    assert loads[LLAMA].latency_ms == pytest.approx(120.0)
    # a model without a duration series, or without requests, has no latency, only its load
    assert loads[BERT].demand_rps == pytest.approx(50.0)
    assert loads[BERT].latency_ms is None
    assert loads[SILENT].latency_ms is None


def test_vllm_mean_latency_is_the_e2e_histogram_sum_over_count_in_ms(prom_url: str) -> None:
    loads = _load(PrometheusSettings(url=prom_url, metric="vllm")).measure(
        {MISTRAL: 1}, _at())
    assert loads[MISTRAL].demand_rps == pytest.approx(12.0)
    assert loads[MISTRAL].latency_ms == pytest.approx(640.0)


@pytest.mark.parametrize(("quantile", "expected_ms"), [(0.95, 1750.0), (0.5, 500.0)])
def test_a_vllm_latency_quantile_interpolates_the_e2e_histogram_buckets_in_ms(
        prom_url: str, quantile: float, expected_ms: float) -> None:
    """90 % of mistral's requests within 1 s and all within 2.5 s: p95 is halfway up that
    bucket; p50 its first bucket's bound. A model whose histogram has no requests is unknown."""
    settings = PrometheusSettings(url=prom_url, metric="vllm", latency_quantile=quantile)
    loads = _load(settings).measure({MISTRAL: 1, SILENT: 1}, _at())
    assert loads[MISTRAL].demand_rps == pytest.approx(12.0)
    assert loads[MISTRAL].latency_ms == pytest.approx(expected_ms)
    assert loads[SILENT].latency_ms is None


TTFT_P95_QUERY = ('histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_'
                  'bucket{model_name="{model}"}[{window}]))) * 1000')


def test_the_readmes_time_to_first_token_p95_query_reads_the_ttft_histogram(
        prom_url: str) -> None:
    """README and deploy/config.yaml show this latency_query for an SLO on TTFT p95."""
    assert TTFT_P95_QUERY in (ROOT / "README.md").read_text().replace("\n", "")
    settings = PrometheusSettings(url=prom_url, metric="vllm", latency_query=TTFT_P95_QUERY)
    loads = _load(settings).measure({MISTRAL: 1}, _at())
    assert loads[MISTRAL].latency_ms == pytest.approx(100.0 + (0.95 - 0.8) / 0.2 * 400.0)


def test_latency_ttft_reads_vllms_time_to_first_token_histogram_as_the_readmes_query_does(
        prom_url: str) -> None:
    """The README's TTFT p95 query, as a setting: the same value."""
    settings = PrometheusSettings(url=prom_url, metric="vllm", latency="ttft",
                                  latency_quantile=0.95)
    load = PrometheusLoad(prometheus_source(settings), {MISTRAL: 18.0}, "vllm",
                          latency_quantile=0.95, latency_timed=settings.latency)
    loads = load.measure({MISTRAL: 1}, _at())
    assert loads[MISTRAL].latency_ms == pytest.approx(100.0 + (0.95 - 0.8) / 0.2 * 400.0)


def test_a_configured_latency_query_replaces_the_preset(prom_url: str) -> None:
    query = ('sum(rate(nv_inference_request_duration_us{{model="{model}"}}[{window}])) / '
             'sum(rate(nv_inference_request_success{{model="{model}"}}[{window}])) / 2000')
    settings = PrometheusSettings(url=prom_url, latency_query=query.replace("{{", "{")
                                  .replace("}}", "}"))
    loads = _load(settings).measure({LLAMA: 2}, _at())
    assert loads[LLAMA].latency_ms == pytest.approx(60.0)


def test_a_latency_query_prometheus_rejects_leaves_the_load_measured_and_logs_it(
        prom_url: str, caplog: pytest.LogCaptureFixture) -> None:
    settings = PrometheusSettings(url=prom_url, latency_query='rate(bad{model="{model}"}[[')
    load = _load(settings)
    with caplog.at_level(logging.WARNING, logger="headroom.prometheus"):
        loads = load.measure({LLAMA: 2}, _at())
    assert loads[LLAMA].demand_rps == pytest.approx(30.0)
    assert loads[LLAMA].latency_ms is None
    assert [(r.getMessage(), r.__dict__["models"]) for r in caplog.records] == [
        ("latency.unmeasured", [LLAMA])]
    assert "bad" in caplog.records[0].__dict__["error"]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="headroom.prometheus"):
        again = load.measure({LLAMA: 2}, _at())
    # the same query fails on every tick: warned once, then logged at debug level
    assert again[LLAMA].latency_ms is None
    assert [r.levelno for r in caplog.records
            if r.getMessage() == "latency.unmeasured"] == [logging.DEBUG]


def test_a_latency_setting_without_a_model_placeholder_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="latency_query"):
        PrometheusSettings(url="http://127.0.0.1:1", latency_query="sum(rate(x[1m]))")


def test_with_prometheus_down_no_load_latency_or_queue_is_measured_and_nothing_raises() -> None:
    down = PrometheusSettings(url=f"http://127.0.0.1:{free_port()}", timeout_s=2)
    loads = _load(down, queue=True).measure({LLAMA: 2}, _at())
    assert (loads[LLAMA].demand_rps, loads[LLAMA].latency_ms) == (None, None)
    assert loads[LLAMA].queued_requests is None
    assert loads[LLAMA].queue_growth_rps is None


def test_a_prometheus_that_does_not_answer_costs_a_tick_one_timeout_not_one_per_reading(
        ) -> None:
    silent = Silent()
    try:
        settings = PrometheusSettings(url=silent.url, metric="vllm", timeout_s=0.5)
        load = PrometheusLoad(prometheus_source(settings), {MISTRAL: 18.0}, "vllm",
                              queue_preset="vllm", kv_cache_preset="vllm")
        (measured,) = load.measure({MISTRAL: 2}, _at()).values()
        # the rate's request timed out; latency, queue and KV cache were not asked
        assert len(silent.held) == 1
        assert measured.demand_rps is None and "did not answer" in measured.why
        assert (measured.latency_ms, measured.queued_requests, measured.kv_cache_usage) == (
            None, None, None)
    finally:
        silent.close()


def test_the_queue_is_each_models_waiting_requests_summed_over_its_replicas(
        prom_url: str, caplog: pytest.LogCaptureFixture) -> None:
    load = _load(PrometheusSettings(url=prom_url), queue=True)
    with caplog.at_level(logging.WARNING, logger="headroom.prometheus"):
        loads = load.measure({LLAMA: 2, BERT: 1}, _at())
    assert loads[LLAMA].queued_requests == pytest.approx(8.0)
    assert loads[LLAMA].queue_growth_rps == pytest.approx(0.5)  # over the rate window
    # a model whose engine exports no queue series: unknown and logged, its load measured
    assert loads[BERT].queued_requests is None
    assert loads[BERT].demand_rps == pytest.approx(50.0)
    queue_logs = [r for r in caplog.records if r.getMessage() == "queue.unmeasured"]
    assert [r.__dict__["models"] for r in queue_logs] == [[BERT]]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="headroom.prometheus"):
        again = load.measure({LLAMA: 2, BERT: 1}, _at())
    # still unmeasured on the next tick: logged at debug level, not warned every tick
    assert again[BERT].queued_requests is None
    assert [(r.levelno, r.__dict__["models"]) for r in caplog.records
            if r.getMessage() == "queue.unmeasured"] == [(logging.DEBUG, [BERT])]
    vllm = _load(PrometheusSettings(url=prom_url, metric="vllm"), queue=True).measure(
        {MISTRAL: 1}, _at())
    assert vllm[MISTRAL].queued_requests == pytest.approx(12.0)
    assert vllm[MISTRAL].queue_growth_rps == pytest.approx(0.0, abs=1e-9)


def test_without_a_queue_preset_no_queue_is_read(prom_url: str) -> None:
    loads = _load(PrometheusSettings(url=prom_url)).measure({LLAMA: 2}, _at())
    assert loads[LLAMA].demand_rps == pytest.approx(30.0)
    assert loads[LLAMA].queued_requests is None
    assert loads[LLAMA].queue_growth_rps is None
