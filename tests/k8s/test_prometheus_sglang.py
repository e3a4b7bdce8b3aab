"""An SGLang fleet (``prometheus.metric: sglang``) from a real Prometheus (Debian package,
backfilled with promtool): each model's request rate (``sglang:num_requests_total``, dated by
its newest sample), its history, its latency (the e2e histogram's mean or a quantile), its
queue (``sglang:num_queue_reqs``) and its KV cache usage (``sglang:token_usage``). A replica
whose schedulers report on every tensor-parallel rank counts once, not once per rank."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Literal

import pytest

from controlplane.adapters.prometheus import PrometheusLoad, prometheus_source
from controlplane.serve_k8s import kv_cache_preset, queue_preset
from controlplane.settings import Settings
from controlplane.settings_cluster import PrometheusSettings
from tests.forecasting.promserver import Family, counter_samples, gauge_samples, prometheus

pytestmark = pytest.mark.prometheus
NOW = int(time.time())
LLAMA, QWEN = "llama-3-8b-chat", "qwen-2-7b-chat"


counter = partial(counter_samples, now_s=NOW)  # an hour before the test to an hour after
gauge = partial(gauge_samples, now_s=NOW)


def histogram(name: str, mean_s: float, shares: Sequence[tuple[str, float]]) -> list[Family]:
    """llama's histogram ``name`` over its 10 requests a second: their mean ``mean_s`` and the
    share of them within each bucket's ``le``."""
    model = f'model_name="{LLAMA}"'
    return [Family(f"{name}_sum", {model: counter(10.0 * mean_s)}),
            Family(f"{name}_count", {model: counter(10.0)}),
            Family(f"{name}_bucket", {f'{model},le="{le}"': counter(10.0 * share)
                                      for le, share in shares})]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama's two replicas: sglang-0 (TP 2, its schedulers reporting on both ranks) serves 6
    rps, holds 5 requests waiting and 90 % of its KV cache; sglang-1 (rank 0 alone) serves 4
    rps, holds 3 waiting and 50 %. llama's requests end in 0.8 s on average, half within 0.5
    s and 90 % within 1 s; their first tokens come in 0.15 s on average, 60 % within 0.1 s
    and 90 % within 0.2 s. qwen: 2 rps, no queue or KV cache gauge."""
    ranks = {"sglang-0": ("0", "1"), "sglang-1": ("0",)}
    waiting, usage = {"sglang-0": 5.0, "sglang-1": 3.0}, {"sglang-0": 0.9, "sglang-1": 0.5}
    rank_series = {f'model_name="{LLAMA}",pod="{pod}",tp_rank="{rank}"': pod
                   for pod, of_pod in ranks.items() for rank in of_pod}
    with prometheus(tmp_path_factory.mktemp("sglang"), [
            Family("sglang:num_requests_total", {
                f'model_name="{LLAMA}",pod="sglang-0"': counter(6.0),
                f'model_name="{LLAMA}",pod="sglang-1"': counter(4.0),
                f'model_name="{QWEN}",pod="qwen-0"': counter(2.0)}),
            *histogram("sglang:e2e_request_latency_seconds", 0.8,
                       (("0.5", 0.5), ("1.0", 0.9), ("2.5", 1.0), ("+Inf", 1.0))),
            *histogram("sglang:time_to_first_token_seconds", 0.15,
                       (("0.1", 0.6), ("0.2", 0.9), ("0.4", 1.0), ("+Inf", 1.0))),
            Family("sglang:num_queue_reqs", {
                labels: gauge(waiting[pod]) for labels, pod in rank_series.items()}),
            Family("sglang:token_usage", {
                labels: gauge(usage[pod]) for labels, pod in rank_series.items()})]) as url:
        yield url


def _settings(prom_url: str, latency_quantile: float | None = None,
              latency: Literal["e2e", "ttft"] = "e2e") -> Settings:
    return Settings(prometheus=PrometheusSettings(url=prom_url, metric="sglang",
                                                  latency_quantile=latency_quantile,
                                                  latency=latency))


def _load(settings: Settings) -> PrometheusLoad:
    prom = settings.prometheus
    return PrometheusLoad(prometheus_source(prom), {LLAMA: 4.0, QWEN: 4.0}, prom.metric,
                          latency_quantile=prom.latency_quantile,
                          queue_preset=queue_preset(settings),
                          kv_cache_preset=kv_cache_preset(settings), latency_timed=prom.latency)


def test_the_sglang_preset_reads_each_models_finished_requests_dated_by_their_samples(
        prom_url: str) -> None:
    now = datetime.fromtimestamp(NOW, UTC)
    loads = _load(_settings(prom_url)).measure({LLAMA: 2, QWEN: 1}, now)
    assert loads[LLAMA].demand_rps == pytest.approx(10.0)
    assert loads[QWEN].demand_rps == pytest.approx(2.0)
    assert loads[LLAMA].undated_why == ""
    sampled_at = loads[LLAMA].sampled_at
    assert sampled_at is not None and (now - sampled_at).total_seconds() < 60
    history = prometheus_source(_settings(prom_url).prometheus).rate_history(
        LLAMA, now - timedelta(hours=2), now, 60)
    assert history.values[62:] == pytest.approx([10.0] * 58)  # the hour with samples, after
    assert all(v != v for v in history.values[:58])  # before the first sample: gaps, not 0


def test_the_latency_is_the_e2e_histograms_mean_or_its_quantile(prom_url: str) -> None:
    now = datetime.fromtimestamp(NOW, UTC)
    mean = _load(_settings(prom_url)).measure({LLAMA: 2}, now)
    assert mean[LLAMA].latency_ms == pytest.approx(800.0)
    p95 = _load(_settings(prom_url, latency_quantile=0.95)).measure({LLAMA: 2}, now)
    assert p95[LLAMA].latency_ms == pytest.approx(1000.0 + (0.95 - 0.9) / 0.1 * 1500.0)


def test_latency_ttft_reads_the_time_to_first_token_histogram_instead(prom_url: str) -> None:
    now = datetime.fromtimestamp(NOW, UTC)
    mean = _load(_settings(prom_url, latency="ttft")).measure({LLAMA: 2}, now)
    assert mean[LLAMA].latency_ms == pytest.approx(150.0)
    p95 = _load(_settings(prom_url, 0.95, latency="ttft")).measure({LLAMA: 2}, now)
    assert p95[LLAMA].latency_ms == pytest.approx(200.0 + (0.95 - 0.9) / 0.1 * 200.0)


def test_a_replica_reporting_on_every_tensor_parallel_rank_counts_once_in_queue_and_kv_cache(
        prom_url: str) -> None:
    loads = _load(_settings(prom_url)).measure({LLAMA: 2, QWEN: 1},
                                               datetime.fromtimestamp(NOW, UTC))
    assert loads[LLAMA].queued_requests == pytest.approx(8.0)  # 5 + 3, not 5 + 5 + 3
    assert loads[LLAMA].queue_growth_rps == pytest.approx(0.0, abs=1e-9)
    assert loads[LLAMA].kv_cache_usage == pytest.approx(0.7)  # (0.9 + 0.5) / 2, not 2.3 / 3
    assert (loads[QWEN].queued_requests, loads[QWEN].kv_cache_usage) == (None, None)
    assert loads[QWEN].demand_rps == pytest.approx(2.0)  # its load still measured


def test_an_sglang_fleet_reads_its_kv_cache_and_queue_while_the_targets_count_them() -> None:
    sglang = Settings(prometheus=PrometheusSettings(metric="sglang"))
    assert (kv_cache_preset(sglang), queue_preset(sglang)) == ("sglang", "sglang")
    off = Settings.model_validate({"prometheus": {"metric": "sglang"},
                                   "reconcile": {"kv_cache_target": 0, "queue_drain_s": 0}})
    assert (kv_cache_preset(off), queue_preset(off)) == (None, None)
