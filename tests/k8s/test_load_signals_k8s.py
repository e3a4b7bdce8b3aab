"""What a model's request rate cannot show, through the whole leader tick against the API test
server (the reactive policy's; the predictive fast path's reading of both is
tests/controlplane/test_demand.py's). A model at capacity completes no more requests than its
replicas serve, so its request rate alone never asks for more; the requests waiting in its
queues do (``reconcile.queue_drain_s``). A vLLM model whose requests are long fills its KV cache
before its request rate nears what its profile says a replica serves; its replicas are then
sized to ``reconcile.kv_cache_target`` (replicas x usage / target, as HPA sizes to a
utilization)."""

from __future__ import annotations

from pathlib import Path

from apiserver import ApiServer
from operator_scenario import (
    LLAMA,
    RESNET,
    first_target,
    operator_settings,
    seed_operator_fleet,
)

from controlplane.domain.observed import ModelLoad
from controlplane.serve_k8s import queue_preset
from controlplane.settings import Settings
from controlplane.sim.clock import VirtualClock


def _queued_target(apiserver: ApiServer, clock: VirtualClock, url: str, settings: Settings,
                  queued: float | None, growth_rps: float | None) -> tuple[int, str]:
    """llama completing 120 rps with ``queued`` requests waiting, growing by ``growth_rps``:
    its replica target and demand reason on a new leader's first tick."""
    loads = {LLAMA: ModelLoad(120.0, 120.0, queued_requests=queued,
                              queue_growth_rps=growth_rps),
             RESNET: ModelLoad(900.0, 250.0)}
    return first_target(apiserver, clock, url, settings, loads, LLAMA)


def test_a_saturated_models_queue_scales_it_beyond_what_its_completions_ask_for(
        apiserver: ApiServer, clock: VirtualClock, tmp_path: Path) -> None:
    seed_operator_fleet(apiserver)
    settings = operator_settings()
    assert settings.reconcile.queue_drain_s == 300.0

    def target(settings: Settings, queued: float | None, growth_rps: float | None,
               run: str) -> tuple[int, str]:
        return _queued_target(apiserver, clock, f"sqlite:///{tmp_path / run}.db", settings,
                              queued, growth_rps)

    plain, reason = target(settings, None, None, "plain")
    assert (plain, reason) == (4, "observed_load")  # 120 rps / (40 x 0.8), rounded up
    # arrivals outrun completions by 60 rps, and 18,000 waiting are served within 300 s: 60
    # more; twice the load
    assert target(settings, 18000.0, 60.0, "queued") == (8, "observed_load")
    off = settings.model_copy(update={"reconcile": settings.reconcile.model_copy(
        update={"queue_drain_s": 0.0})})
    assert target(off, 18000.0, 60.0, "off") == (4, "observed_load")


def test_serve_reads_the_presets_queue_unless_a_custom_query_or_a_zero_drain_time() -> None:
    settings = operator_settings()
    assert queue_preset(settings) == "triton"
    vllm = settings.model_copy(update={"prometheus": settings.prometheus.model_copy(
        update={"metric": "vllm"})})
    assert queue_preset(vllm) == "vllm"
    custom = settings.model_copy(update={"prometheus": settings.prometheus.model_copy(
        update={"query": 'sum(rate(my_requests_total{service="{model}"}[{window}]))'})})
    assert queue_preset(custom) is None
    off = settings.model_copy(update={"reconcile": settings.reconcile.model_copy(
        update={"queue_drain_s": 0.0})})
    assert queue_preset(off) is None


def _kv_cache_target(apiserver: ApiServer, clock: VirtualClock, url: str, settings: Settings,
                  kv_cache_usage: float | None) -> tuple[int, str]:
    """llama's three ready replicas (40 rps each) serving 60 rps with ``kv_cache_usage`` of
    their KV cache held: its replica target and demand reason on a new leader's first tick."""
    loads = {LLAMA: ModelLoad(60.0, 120.0, kv_cache_usage=kv_cache_usage),
             RESNET: ModelLoad(900.0, 250.0)}
    return first_target(apiserver, clock, url, settings, loads, LLAMA)


def test_a_model_whose_kv_cache_is_full_gets_replicas_its_request_rate_would_not_ask_for(
        apiserver: ApiServer, clock: VirtualClock, tmp_path: Path) -> None:
    seed_operator_fleet(apiserver)
    settings = operator_settings()
    assert settings.reconcile.kv_cache_target == 0.9

    def target(settings: Settings, usage: float | None, run: str) -> tuple[int, str]:
        return _kv_cache_target(apiserver, clock, f"sqlite:///{tmp_path / run}.db", settings,
                                usage)

    # 60 rps / (40 x 0.8): 2 replicas, from the rate alone
    assert target(settings, None, "unread") == (2, "observed_load")
    assert target(settings, 0.5, "roomy") == (2, "observed_load")
    # 3 replicas at 99 % of their KV cache want 3 x 0.99 / 0.9 = 3.3: 4
    assert target(settings, 0.99, "full") == (4, "observed_load")
    off = settings.model_copy(update={"reconcile": settings.reconcile.model_copy(
        update={"kv_cache_target": 0.0})})
    assert target(off, 0.99, "off") == (2, "observed_load")
