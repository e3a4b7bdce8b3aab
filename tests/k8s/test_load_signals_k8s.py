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


def _reading(settings: Settings, key: str, value: float) -> Settings:
    """``settings`` with ``reconcile.<key>`` set to ``value``."""
    return settings.model_copy(update={"reconcile": settings.reconcile.model_copy(
        update={key: value})})


class FirstTicks:
    """New leaders' first ticks, each on a store of its own: llama's replica target and its
    demand's reason when llama's load is read as given (resnet's as in ``LOADS``)."""

    def __init__(self, apiserver: ApiServer, clock: VirtualClock, tmp_path: Path) -> None:
        seed_operator_fleet(apiserver)
        self.apiserver, self.clock, self.tmp_path = apiserver, clock, tmp_path
        self.runs = 0

    def llama(self, settings: Settings, llama: ModelLoad) -> tuple[int, str]:
        self.runs += 1
        url = f"sqlite:///{self.tmp_path / str(self.runs)}.db"
        return first_target(self.apiserver, self.clock, url, settings,
                            {LLAMA: llama, RESNET: ModelLoad(900.0, 250.0)}, LLAMA)


def test_a_saturated_models_queue_scales_it_beyond_what_its_completions_ask_for(
        apiserver: ApiServer, clock: VirtualClock, tmp_path: Path) -> None:
    ticks, settings = FirstTicks(apiserver, clock, tmp_path), operator_settings()
    assert settings.reconcile.queue_drain_s == 300.0
    # llama completes 120 rps: 120 / (40 x 0.8), rounded up
    assert ticks.llama(settings, ModelLoad(120.0, 120.0)) == (4, "observed_load")
    # arrivals outrun completions by 60 rps, and 18,000 waiting are served within 300 s: 60
    # more; twice the load
    queued = ModelLoad(120.0, 120.0, queued_requests=18000.0, queue_growth_rps=60.0)
    assert ticks.llama(settings, queued) == (8, "observed_load")
    assert ticks.llama(_reading(settings, "queue_drain_s", 0.0), queued) == (4, "observed_load")


def test_serve_reads_the_presets_queue_unless_a_custom_query_or_a_zero_drain_time() -> None:
    settings = operator_settings()
    assert queue_preset(settings) == "triton"
    vllm = settings.model_copy(update={"prometheus": settings.prometheus.model_copy(
        update={"metric": "vllm"})})
    assert queue_preset(vllm) == "vllm"
    custom = settings.model_copy(update={"prometheus": settings.prometheus.model_copy(
        update={"query": 'sum(rate(my_requests_total{service="{model}"}[{window}]))'})})
    assert queue_preset(custom) is None
    assert queue_preset(_reading(settings, "queue_drain_s", 0.0)) is None


def test_a_model_whose_kv_cache_is_full_gets_replicas_its_request_rate_would_not_ask_for(
        apiserver: ApiServer, clock: VirtualClock, tmp_path: Path) -> None:
    ticks, settings = FirstTicks(apiserver, clock, tmp_path), operator_settings()
    assert settings.reconcile.kv_cache_target == 0.9

    def held(usage: float | None) -> ModelLoad:
        """llama's three ready replicas (40 rps each) serving 60 rps, ``usage`` of their KV
        cache held."""
        return ModelLoad(60.0, 120.0, kv_cache_usage=usage)

    # 60 rps / (40 x 0.8): 2 replicas, from the rate alone
    assert ticks.llama(settings, held(None)) == (2, "observed_load")
    assert ticks.llama(settings, held(0.5)) == (2, "observed_load")
    # 3 replicas at 99 % of their KV cache want 3 x 0.99 / 0.9 = 3.3: 4
    assert ticks.llama(settings, held(0.99)) == (4, "observed_load")
    off = _reading(settings, "kv_cache_target", 0.0)
    assert ticks.llama(off, held(0.99)) == (2, "observed_load")
