"""The demo fleet: six models across three tenants and all three isolation classes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.sim import traffic
from controlplane.sim.traffic import TrafficShape


def _spec(name: str, tenant: str, isolation: Isolation, engine: Engine, slo_ms: float,
          point: ProfilePoint, cold: ColdStart) -> ModelSpec:
    return ModelSpec(name=name, tenant=tenant, isolation=isolation, engine=engine,
                     latency_slo_ms=slo_ms, profile=(point,), cold_start=cold)


DEMO_MODELS: tuple[ModelSpec, ...] = (
    _spec("llama-3-8b-chat", "acme", Isolation.TRUSTED, Engine.VLLM, 400.0,
          ProfilePoint("A100-80GB", 3, 16, 2, 40.0, 150.0, 36_000), ColdStart(25.0, 45.0)),
    _spec("mistral-7b-support", "acme", Isolation.STRICT, Engine.VLLM, 500.0,
          ProfilePoint("A100-80GB", 2, 8, 1, 18.0, 180.0, 18_000), ColdStart(22.0, 40.0)),
    _spec("resnet50-vision", "globex", Isolation.TRUSTED, Engine.TRITON, 50.0,
          ProfilePoint("A100-80GB", 1, 32, 2, 250.0, 15.0, 4_000), ColdStart(4.0, 8.0)),
    _spec("bert-embed", "globex", Isolation.NONE, Engine.TRITON, 40.0,
          ProfilePoint("L4", 0, 64, 1, 300.0, 12.0, 6_000), ColdStart(5.0, 10.0)),
    # An AWQ-int4 build: bf16 weights of 70B parameters are ~140 GB, int4 ~35 GB (REFERENCE.md
    # §6.4), which leaves vLLM KV cache on one H100. vLLM takes --gpu-memory-utilization 0.9 of
    # the 81,152 MiB CUDA can use of the GPU (§1.3, 79.25 GiB): 73,036 MiB, so 73,000.
    _spec("llama-3-70b", "initech", Isolation.STRICT, Engine.VLLM, 1500.0,
          ProfilePoint("H100-80GB", 0, 8, 1, 12.0, 600.0, 73_000), ColdStart(45.0, 80.0)),
    _spec("whisper-asr", "initech", Isolation.NONE, Engine.TRITON, 800.0,
          ProfilePoint("L4", 0, 4, 1, 20.0, 300.0, 10_000), ColdStart(12.0, 25.0)),
)

DEMO_TRAFFIC: tuple[TrafficShape, ...] = (
    TrafficShape("llama-3-8b-chat", 110.0, 15.0, 0.45, 0.7, 2.0, 1.8, 0.05),
    TrafficShape("mistral-7b-support", 45.0, 14.0, 0.5, 0.5, 1.0, 1.6, 0.06),
    TrafficShape("resnet50-vision", 420.0, 18.0, 0.35, 0.9, 3.0, 2.2, 0.08),
    TrafficShape("bert-embed", 650.0, 10.0, 0.3, 0.8, 2.0, 1.7, 0.05),
    TrafficShape("llama-3-70b", 28.0, 16.0, 0.5, 0.6, 1.0, 1.5, 0.05),
    TrafficShape("whisper-asr", 24.0, 20.0, 0.4, 0.8, 1.5, 2.0, 0.07),
)


def not_demo_models(names: Iterable[str]) -> list[str]:
    """The names among ``names`` that are no demo model (sorted): a store listing one belongs
    to a real fleet (``headroom models import``), not to the simulated one."""
    demo = {spec.name for spec in DEMO_MODELS}
    return sorted(set(names) - demo)


def demo_rate_rps(seed: int) -> Callable[[str, datetime], float]:
    """Each model's simulated load: the demo's traffic shape of its name; a model the demo has
    no traffic for (imported into a demo store) gets none, 0 rps."""
    shapes = {t.model: t for t in DEMO_TRAFFIC}

    def rate_rps(model: str, at: datetime) -> float:
        shape = shapes.get(model)
        return 0.0 if shape is None else traffic.rate_rps(shape, seed, at)
    return rate_rps
