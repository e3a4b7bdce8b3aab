"""The ``fleet`` section of ``headroom simulate``'s models file, and the value types the file's
sections share (seconds, prices, quantiles; extra keys allowed, as in the whole file)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, model_validator

from controlplane.simulation.sim_config import NodeShape
from controlplane.yaml_numbers import NoTextForANumber
from scheduler.domain.validate import MAX_GPUS_PER_NODE


class Loose(NoTextForANumber):
    model_config = ConfigDict(extra="allow", frozen=True)


#: the longest cold start, wake or provisioning time: a week (more is a unit mistake, ms written
#: as s; near 1e300 s the lognormal's tail and the simulated clock overflow)
MAX_SECONDS = 7 * 86_400.0
#: seconds, finite, > 0 and at most MAX_SECONDS (``.inf`` in YAML is refused, naming the field)
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
#: a price (USD per GPU-hour) or a GPU budget: finite and >= 0
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
#: a price, USD per GPU-hour: list prices are a few dollars; near 1e308 the cost overflows to inf
Price = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]


class Quantiles(Loose):
    p50: Seconds
    p90: Seconds

    @model_validator(mode="after")
    def _ordered(self) -> Quantiles:
        if self.p90 < self.p50:
            raise ValueError(f"p90 ({self.p90}) < p50 ({self.p50})")
        return self


class PoolSection(Loose):
    """``fleet.pools.<PRODUCT>``: that product's node size and bounds (as serve's pools)."""

    gpus_per_node: int | None = Field(None, ge=1, le=MAX_GPUS_PER_NODE)  # None: the fleet's
    min_nodes: int = Field(0, ge=0)
    max_nodes: int | None = Field(None, ge=1)  # None: the fleet's

    @model_validator(mode="after")
    def _min_below_max(self) -> PoolSection:
        if self.max_nodes is not None and self.min_nodes > self.max_nodes:
            raise ValueError(f"min_nodes {self.min_nodes} > max_nodes {self.max_nodes}")
        return self


class FleetSection(Loose):
    node_provision_s: Quantiles = Quantiles(p50=120, p90=240)
    gpus_per_node: int = Field(8, ge=1, le=MAX_GPUS_PER_NODE)  # settings' pools alike
    max_nodes: int = Field(10_000, ge=1, description="per GPU product")
    cached_start_s: Quantiles = Quantiles(p50=3, p90=5)
    idle_wake_s: float = Field(2.0, ge=0, le=MAX_SECONDS, allow_inf_nan=False)
    prices: dict[str, Price] = Field(default_factory=dict)  # USD per GPU-hour
    cluster_gpu_budget: int | None = Field(None, ge=0)
    tenant_gpu_budgets: dict[str, NonNegative] = Field(default_factory=dict)  # GPUs
    pools: dict[str, PoolSection] = Field(default_factory=dict)  # by GPU product

    @model_validator(mode="after")
    def _min_below_the_fleet_max(self) -> FleetSection:
        for product, pool in self.pools.items():
            if pool.max_nodes is None and pool.min_nodes > self.max_nodes:
                raise ValueError(f"pools.{product}: min_nodes {pool.min_nodes} > "
                                 f"fleet.max_nodes {self.max_nodes}")
        return self

    def node_gpus(self, product: str) -> tuple[int, str]:
        """GPUs a node of ``product`` has, and the key that says so."""
        pool = self.pools.get(product)
        if pool is not None and pool.gpus_per_node is not None:
            return pool.gpus_per_node, f"fleet.pools.{product}.gpus_per_node"
        return self.gpus_per_node, "fleet.gpus_per_node"

    def node_shapes(self) -> dict[str, NodeShape]:
        return {product: NodeShape(product.lower(), self.node_gpus(product)[0], pool.min_nodes,
                                   self.max_nodes if pool.max_nodes is None else pool.max_nodes)
                for product, pool in self.pools.items()}
