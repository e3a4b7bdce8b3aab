"""A fleet that mixes engines (``prometheus.by_engine``), from a real Prometheus (Debian
package, backfilled with promtool): each model is read by its engine's preset (the models
file's ``engine``), one grouped query per engine, for its rate, its history, its latency, its
queue and its KV cache; a Triton model keeps its mean latency where a quantile is asked, and has
no KV cache to miss."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from controlplane.adapters.prometheus import PrometheusHistory, PrometheusLoad, prometheus_source
from controlplane.serve_k8s import kv_cache_preset, queue_preset
from controlplane.settings import Settings
from controlplane.settings_cluster import PrometheusSettings
from tests.forecasting.promserver import Family, counter_samples, gauge_samples, prometheus

pytestmark = pytest.mark.prometheus
NOW = int(time.time())
RESNET, MISTRAL, LLAMA = "resnet50-vision", "mistral-7b-support", "llama-3-8b-chat"
ENGINES = {RESNET: "triton", MISTRAL: "vllm", LLAMA: "sglang"}
counter = partial(counter_samples, now_s=NOW)  # an hour before the test to an hour after
gauge = partial(gauge_samples, now_s=NOW)


def latency_buckets(name: str, model: str, rps: float) -> Family:
    """Half of ``model``'s requests within 0.5 s, 90 % within 1 s, all within 2.5 s."""
    return Family(name, {f'model_name="{model}",le="{le}"': counter(rps * share)
                         for le, share in (("0.5", 0.5), ("1.0", 0.9), ("2.5", 1.0),
                                           ("+Inf", 1.0))})


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """resnet on Triton: 30 served and 2 rejected requests a second at 20 ms, 4 queued.
    mistral on vLLM: 12 rps, 6 waiting, 80 % of its KV cache. llama on SGLang: 10 rps, 3
    waiting, 50 %."""
    families: Sequence[Family] = [
        Family("nv_inference_request_success", {f'model="{RESNET}",version="1"': counter(30.0)}),
        Family("nv_inference_request_failure", {
            f'model="{RESNET}",version="1",reason="REJECTED"': counter(2.0)}),
        Family("nv_inference_request_duration_us", {
            f'model="{RESNET}",version="1"': counter(30.0 * 20_000)}),
        Family("nv_inference_pending_request_count", {f'model="{RESNET}",version="1"': gauge(4)}),
        Family("vllm:request_success_total", {f'model_name="{MISTRAL}"': counter(12.0)}),
        latency_buckets("vllm:e2e_request_latency_seconds_bucket", MISTRAL, 12.0),
        Family("vllm:num_requests_waiting", {f'model_name="{MISTRAL}"': gauge(6.0)}),
        Family("vllm:kv_cache_usage_perc", {f'model_name="{MISTRAL}"': gauge(0.8)}),
        Family("sglang:num_requests_total", {f'model_name="{LLAMA}"': counter(10.0)}),
        latency_buckets("sglang:e2e_request_latency_seconds_bucket", LLAMA, 10.0),
        Family("sglang:num_queue_reqs", {f'model_name="{LLAMA}",tp_rank="0"': gauge(3.0)}),
        Family("sglang:token_usage", {f'model_name="{LLAMA}",tp_rank="0"': gauge(0.5)})]
    with prometheus(tmp_path_factory.mktemp("by-engine"), families) as url:
        yield url


def _settings(prom_url: str, by_engine: bool = True) -> Settings:
    """Triton's preset by default; with ``by_engine``, the p95 of the engines that have a
    latency histogram (refused for a Triton fleet without it)."""
    return Settings(prometheus=PrometheusSettings(
        url=prom_url, metric="triton", by_engine=by_engine,
        latency_quantile=0.95 if by_engine else None))


def _load(settings: Settings, engines: dict[str, str]) -> PrometheusLoad:
    prom = settings.prometheus
    source = prometheus_source(prom, engines=lambda: engines)
    return PrometheusLoad(source, {RESNET: 40.0, MISTRAL: 8.0, LLAMA: 8.0}, prom.metric,
                          latency_quantile=prom.latency_quantile,
                          queue_preset=queue_preset(settings),
                          kv_cache_preset=kv_cache_preset(settings))


def _at() -> datetime:
    return datetime.fromtimestamp(NOW, UTC)


P95_MS = 1000.0 + (0.95 - 0.9) / 0.1 * 1500.0  # within the 1-2.5 s bucket


def test_each_model_is_read_by_its_engines_preset(
        prom_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="headroom.prometheus"):
        loads = _load(_settings(prom_url), ENGINES).measure({RESNET: 1, MISTRAL: 2, LLAMA: 2},
                                                            _at())
    assert {m: load.demand_rps for m, load in loads.items()} == pytest.approx(
        {RESNET: 32.0, MISTRAL: 12.0, LLAMA: 10.0})  # Triton's rejected requests counted
    assert all(load.sampled_at is not None for load in loads.values())
    assert loads[RESNET].latency_ms == pytest.approx(20.0)  # no histogram: its mean
    assert loads[MISTRAL].latency_ms == pytest.approx(P95_MS)
    assert loads[LLAMA].latency_ms == pytest.approx(P95_MS)
    assert {m: load.queued_requests for m, load in loads.items()} == pytest.approx(
        {RESNET: 4.0, MISTRAL: 6.0, LLAMA: 3.0})
    assert (loads[MISTRAL].kv_cache_usage, loads[LLAMA].kv_cache_usage) == pytest.approx(
        (0.8, 0.5))
    assert loads[RESNET].kv_cache_usage is None
    assert caplog.records == []  # nothing unmeasured: Triton has no KV cache to miss


def test_the_history_of_each_model_is_read_by_its_engines_preset(prom_url: str) -> None:
    source = prometheus_source(_settings(prom_url).prometheus, engines=lambda: ENGINES)
    history = PrometheusHistory(source, lambda: sorted(ENGINES))
    now = _at()
    for model, rps in ((RESNET, 32.0), (MISTRAL, 12.0), (LLAMA, 10.0)):
        values = history.rate_history(model, now - timedelta(minutes=50), now, 60).values
        assert values[5:] == pytest.approx([rps] * 45), model


def test_a_model_reimported_on_another_engine_is_read_by_that_engines_preset_at_once(
        prom_url: str) -> None:
    engines = dict(ENGINES)
    load = _load(_settings(prom_url), engines)
    engines[MISTRAL] = "triton"  # the models file now says Triton: no such series there
    loads = load.measure({RESNET: 1, MISTRAL: 2}, _at())
    assert loads[MISTRAL].demand_rps is None
    assert "nv_inference_request_success" in loads[MISTRAL].why


def test_without_by_engine_the_fleets_one_preset_misses_the_other_engines_models(
        prom_url: str) -> None:
    loads = _load(_settings(prom_url, by_engine=False), ENGINES).measure(
        {RESNET: 1, MISTRAL: 2, LLAMA: 2}, _at())
    assert loads[RESNET].demand_rps == pytest.approx(32.0)
    assert (loads[MISTRAL].demand_rps, loads[LLAMA].demand_rps) == (None, None)


def test_by_engine_reads_the_kv_cache_under_a_triton_default_and_refuses_a_shared_query(
        ) -> None:
    assert kv_cache_preset(Settings(prometheus=PrometheusSettings(by_engine=True))) == "triton"
    assert kv_cache_preset(Settings()) is None
    with pytest.raises(ValueError, match=r"prometheus\.by_engine reads each model by its "
                                         r"engine's preset; a prometheus\.query replaces"):
        PrometheusSettings(by_engine=True, query='sum(rate(x{model="{model}"}[1m]))')
