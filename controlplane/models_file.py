"""The models file ``headroom models import`` reads: the models ``headroom serve`` manages, each
with its offline profile (throughput per slice shape within the latency SLO), as the store's
models table and the placement API's ``ModelDemand`` hold them.

```yaml
models:
  - name: llama-3-8b-chat          # as the workload's headroom.dev/model-name and Prometheus say
    tenant: acme
    isolation: strict              # strict | trusted | none
    engine: vllm                   # triton | vllm | sglang
    latency_slo_ms: 2000
    cold_start: {p50_s: 60, p90_s: 180}
    min_replicas: 1                # optional: hot replicas never fewer (a GPU budget or pool
    max_replicas: 40               # max_nodes still wins); hot + idle never more
    profile:
      - {product: A100-80GB, compute_slices: 3, batch_size: 8, throughput_rps: 20,
         latency_ms: 800, memory_mib: 30000}
```

A point's ``throughput_rps`` is what one *segment* of its shape serves within the SLO: a MIG
instance of ``compute_slices`` g (0 = a whole GPU) running ``mps_processes`` MPS processes at
``batch_size``, all the processes together, as the placement API's ``ProfilePoint`` and PlanFleet
(and ParvaGPU) count it. On a whole GPU shared by MPS each process is a replica of its own (a
pod holding one of the GPU's ``mps_processes`` device-plugin shares), so a replica serves
``throughput_rps / mps_processes`` on ``1 / mps_processes`` of the GPU: a point of 4 processes
at 100 rps is sized as replicas of 25 rps, 4 to a GPU. A MIG instance runs one replica (its
processes under its own MPS daemon) that serves all of ``throughput_rps``
(``ProfilePoint.replica_rps``, ``replica_gpu_share``). A point of ``gpus`` (default 1) > 1 is
one replica of that many whole GPUs of one node (tensor parallel: ``compute_slices`` 0,
``mps_processes`` 1) serving all of ``throughput_rps``, with ``memory_mib`` on each GPU.

The whole file is checked before anything is written: an impossible profile (a product not in
the catalog, a MIG size the product does not offer, more memory than the slice holds, a
throughput of 0, a point of several GPUs on a MIG instance, a ``max_replicas`` below
``min_replicas``) is an error naming the file, the model and the field
(``ModelsFileError``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec
from controlplane.domain.pause import MAX_REPLICAS
from controlplane.models_yaml import duplicate_names, validated, written_names
from controlplane.profile_points import PointEntry, Positive, StrictEntry, placeable
from scheduler.domain.names import MAX_MODEL_CHARS, MAX_TENANT_CHARS, name_problem

#: a cold start over a week is a unit mistake (ms written as s)
MAX_COLD_START_S = 7 * 86_400.0


class _ColdStart(StrictEntry):
    p50_s: float = Field(ge=0, le=MAX_COLD_START_S, allow_inf_nan=False)
    p90_s: float = Field(ge=0, le=MAX_COLD_START_S, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> _ColdStart:
        if self.p90_s < self.p50_s:
            raise ValueError(f"p90_s ({self.p90_s:g}) < p50_s ({self.p50_s:g})")
        return self


class _Model(StrictEntry):
    name: str = Field(min_length=1)  # at most the store's column widths (_a_name)
    tenant: str = Field("default", min_length=1)
    isolation: Isolation
    engine: Engine
    latency_slo_ms: Positive
    cold_start: _ColdStart
    profile: list[PointEntry] = Field(min_length=1)
    min_replicas: int | None = Field(None, ge=0, le=MAX_REPLICAS,
                                     description="hot replicas never fewer")
    max_replicas: int | None = Field(None, ge=1, le=MAX_REPLICAS,
                                     description="hot + idle replicas never more")

    # the checks across fields are field validators reading the fields declared before them
    # (``info.data`` holds those that are valid): each runs whenever what it reads is valid,
    # however the model's other fields are, so one run lists every problem of the file

    @field_validator("max_replicas")
    @classmethod
    def _bounds_ordered(cls, max_replicas: int | None, info: ValidationInfo) -> int | None:
        min_replicas = info.data.get("min_replicas")
        if min_replicas is not None and max_replicas is not None and max_replicas < min_replicas:
            raise ValueError(f"{max_replicas} is below min_replicas {min_replicas}")
        return max_replicas

    @field_validator("name", "tenant")
    @classmethod
    def _a_name(cls, value: str, info: ValidationInfo) -> str:  # as the placement API's
        problem = name_problem(value, MAX_MODEL_CHARS if info.field_name == "name"
                               else MAX_TENANT_CHARS)
        if problem is not None:
            raise ValueError(problem)
        if not value.strip():
            raise ValueError("must not be empty or only whitespace")
        if value != value.strip():  # " bert" and "bert" would be two models, one never matched
            raise ValueError(f"{value!r} begins or ends with whitespace")
        return value

    @field_validator("isolation", "engine", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:  # DESIGN.md writes STRICT | TRUSTED | NONE
        return value.lower() if isinstance(value, str) else value

    @field_validator("profile")
    @classmethod
    def _one_point_meets_the_slo(cls, profile: list[PointEntry], info: ValidationInfo
                                 ) -> list[PointEntry]:
        if "latency_slo_ms" in info.data:
            placeable(profile, info.data.get("isolation"), info.data["latency_slo_ms"])
        return profile


class _File(StrictEntry):
    models: list[_Model] = Field(min_length=1)


def _spec(model: _Model) -> ModelSpec:
    return ModelSpec(
        name=model.name, tenant=model.tenant, isolation=model.isolation, engine=model.engine,
        latency_slo_ms=model.latency_slo_ms,
        profile=tuple(p.point() for p in model.profile),
        cold_start=ColdStart(model.cold_start.p50_s, model.cold_start.p90_s),
        min_replicas=model.min_replicas, max_replicas=model.max_replicas)


def as_models_file(specs: Sequence[ModelSpec]) -> dict[str, Any]:
    """The models file that loads back as ``specs`` (``load_model_specs``): ``headroom models
    list --yaml`` writes it, for ``models import`` on another store or ``headroom simulate
    --models``. The optional fields are written where set, the points' every field always."""
    def entry(spec: ModelSpec) -> dict[str, Any]:
        bounds = {k: v for k, v in (("min_replicas", spec.min_replicas),
                                    ("max_replicas", spec.max_replicas)) if v is not None}
        return {"name": spec.name, "tenant": spec.tenant, "isolation": spec.isolation.value,
                "engine": spec.engine.value, "latency_slo_ms": spec.latency_slo_ms,
                "cold_start": {"p50_s": spec.cold_start.p50_s, "p90_s": spec.cold_start.p90_s},
                **bounds, "profile": [asdict(point) for point in spec.profile]}

    return {"models": [entry(spec) for spec in specs]}


def load_model_specs(path: Path) -> list[ModelSpec]:
    """Every model of the file, checked; ``ModelsFileError`` naming file, model and field, every
    problem of the file in one run (a name two models give with the models' own)."""
    parsed = validated(path, _File, "'models'", file_problems=lambda raw: duplicate_names(
        path, written_names(raw)))
    return [_spec(m) for m in parsed.models]
