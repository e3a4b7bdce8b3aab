"""What a simulated run served: demand and served request-seconds and GPU-seconds, in all and
per model (``SimRuntime``'s tally, the demo summary's served share and shortfall)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ModelTally:
    """One model's seconds, those short of its (true) capacity, and the GPU-seconds its
    replicas held (ready or starting, by the GPU share of their slice)."""

    model_s: float = 0.0
    short_s: float = 0.0
    gpu_s: float = 0.0


@dataclass(slots=True)
class ServedTally:
    """Demand and served request-seconds, and model-seconds short of capacity (in all and per
    model). Capacity is what the simulated replicas really serve within the SLO."""

    demand_rs: float = 0.0
    served_rs: float = 0.0
    model_s: float = 0.0
    short_model_s: float = 0.0
    models: dict[str, ModelTally] = field(default_factory=dict)

    @property
    def served_share(self) -> float:
        return self.served_rs / self.demand_rs if self.demand_rs else 1.0
