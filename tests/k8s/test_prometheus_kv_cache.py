"""Each vLLM model's KV cache usage from a real Prometheus (Debian package, backfilled with
promtool): the mean of its replicas' ``vllm:kv_cache_usage_perc`` (or, from a vLLM before V1,
``vllm:gpu_cache_usage_perc``), one grouped query per tick; a usage it cannot read is None,
warned once, and never costs the model its measured load."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial

import pytest

from controlplane.adapters.prometheus import PrometheusLoad, prometheus_source
from controlplane.serve_k8s import kv_cache_preset
from controlplane.settings import Settings
from controlplane.settings_cluster import PrometheusSettings
from tests.forecasting.promserver import Family, counter_samples, gauge_samples, prometheus

pytestmark = pytest.mark.prometheus
NOW = int(time.time())
MISTRAL, QWEN, OLD = "mistral-7b-support", "qwen-2-7b-chat", "phi-3-mini"


counter = partial(counter_samples, now_s=NOW)  # an hour before the test to an hour after
gauge = partial(gauge_samples, now_s=NOW)


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """mistral's two replicas hold 60 % and 80 % of their KV cache (and, under the name vLLM
    used before V1, a stale 10 %); qwen's one replica, an older vLLM, 50 %; phi exports none."""
    with prometheus(tmp_path_factory.mktemp("kv"), [
            Family("vllm:request_success_total", {f'model_name="{MISTRAL}"': counter(12.0),
                                                  f'model_name="{QWEN}"': counter(5.0),
                                                  f'model_name="{OLD}"': counter(2.0)}),
            Family("vllm:kv_cache_usage_perc", {
                f'model_name="{MISTRAL}",pod="mistral-0"': gauge(0.6),
                f'model_name="{MISTRAL}",pod="mistral-1"': gauge(0.8)}),
            Family("vllm:gpu_cache_usage_perc", {
                f'model_name="{MISTRAL}",pod="mistral-0"': gauge(0.1),
                f'model_name="{QWEN}",pod="qwen-0"': gauge(0.5)})]) as url:
        yield url


def _load(prom_url: str) -> PrometheusLoad:
    settings = Settings(prometheus=PrometheusSettings(url=prom_url, metric="vllm"))
    return PrometheusLoad(prometheus_source(settings.prometheus),
                          {MISTRAL: 10.0, QWEN: 4.0, OLD: 4.0}, "vllm",
                          kv_cache_preset=kv_cache_preset(settings))


def test_the_kv_cache_usage_is_the_mean_over_each_models_replicas_under_either_name(
        prom_url: str) -> None:
    loads = _load(prom_url).measure({MISTRAL: 2, QWEN: 1, OLD: 1},
                                    datetime.fromtimestamp(NOW, UTC))
    assert loads[MISTRAL].kv_cache_usage == pytest.approx(0.7)  # the V1 name wins
    assert loads[QWEN].kv_cache_usage == pytest.approx(0.5)
    assert loads[OLD].kv_cache_usage is None  # not read: unknown, not 0
    assert loads[OLD].demand_rps == pytest.approx(2.0)  # its load still measured


def test_a_usage_that_stays_unmeasured_is_warned_once_then_logged_at_debug_level(
        prom_url: str, caplog: pytest.LogCaptureFixture) -> None:
    load = _load(prom_url)
    at = datetime.fromtimestamp(NOW, UTC)
    with caplog.at_level(logging.DEBUG, logger="headroom.prometheus"):
        load.measure({MISTRAL: 2, OLD: 1}, at)
        load.measure({MISTRAL: 2, OLD: 1}, at)
    logged = [(r.levelno, r.__dict__["models"]) for r in caplog.records
              if r.getMessage() == "kv_cache.unmeasured"]
    assert logged == [(logging.WARNING, [OLD]), (logging.DEBUG, [OLD])]


def test_only_vllm_is_read_and_only_while_a_target_counts_it() -> None:
    vllm = Settings(prometheus=PrometheusSettings(metric="vllm"))
    assert vllm.reconcile.kv_cache_target == 0.9
    assert kv_cache_preset(vllm) == "vllm"
    assert kv_cache_preset(Settings()) is None  # Triton exports no KV cache usage
    off = vllm.model_copy(update={"reconcile": vllm.reconcile.model_copy(
        update={"kv_cache_target": 0.0})})
    assert kv_cache_preset(off) is None
    # a fraction, not a rate: read beside a custom query (tokens, say) too
    custom = Settings(prometheus=PrometheusSettings(
        metric="vllm", query='sum(rate(vllm:generation_tokens_total{model_name="{model}"}[1m]))'))
    assert kv_cache_preset(custom) == "vllm"
