"""Whether the capacity the control plane knows can hold a demand hint (pure).

A hint is accepted whatever its rate: the announcement is true demand, and the loop scales the
model as far as its node pool(s) and GPU budgets let it (``sizing.apply_gpu_budgets`` caps the
replicas, naming the limit). Refusing it would lose what was announced; so the operator is told
instead, at announce time (``hint_capacity``: ``headroom hint add``'s ``warning:`` line, AddHint's
``capacity_warning``) and at each tick the cap binds (``capped_hints``: the replica target's
reason and a note on the tick's record, which ``headroom status`` shows).

``hint_capacity`` counts the model alone, as if no other model took a GPU of its pool or
budget: what the known capacity can ever hold for it. Other models sharing the pool or budget
can leave it less at a given tick; the tick says so then. The rate is in the hint's terms: the
loop sizes a model for its demand over ``reconcile.target_utilization``, so a hint of R rps
needs ``ceil(R / target_utilization / per_replica_rps)`` replicas (the forecast's calibrated
upper tail, applied on top of a floored step, can ask for more), and the capacity is given as
the rate its replicas are sized for at that utilization. ``per_replica_rps`` is the one the loop
sizes with (``sizing_profile``): with ``autoscaling.profile_correction`` on, the profile the last
tick corrected online (each tick starts from it), else the offline one; counted on the offline
profile alone, a model the loop had corrected to 0.6x was said to hold 129.6 rps where the loop
sized it for 78, and a hint it capped was added without a word.

A hint on a paused model is stored too, but the pause holds the model's replicas until
``headroom models resume``: ``HintCheck`` carries the pause beside the capacity, so
``headroom hint add`` and AddHint say so as the hint is added.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from controlplane.autoscaling.core import Budgets, FleetModel, Sizing
from controlplane.autoscaling.hints import HintedInputs
from controlplane.autoscaling.sizing import (
    CLUSTER_BUDGET,
    POOL_MAX_NODES,
    TENANT_BUDGET,
    ModelRequest,
    ReplicaShape,
)
from controlplane.domain.demand import HINTED, Demand, DemandPolicy, replicas_for
from controlplane.domain.desired import PoolSpec
from controlplane.domain.hints import rps_text
from controlplane.domain.pause import ModelPause
from controlplane.domain.profile import ProfileCorrection

#: the limit named when no pool runs the model's GPU product (``no_pool:<product>``)
NO_POOL = "no_pool"
#: the suffix of a replica target's reason when a GPU budget or pool capped a hint's demand
HINT_CAPPED = "+demand_hint_capped"
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class HintCapacity:
    """What a hint of ``rate_rps`` on ``model`` needs and what the known capacity holds for
    the model alone: replicas and whole GPUs, and the rate those replicas are sized for at the
    target utilization. ``limit`` is the binding limit (``pool_max_nodes:<pool>``,
    ``tenant_gpu_budget:<tenant>``, ``cluster_gpu_budget``, ``no_pool:<product>``): the
    smallest of them, named as the tick's cap would name it."""

    model: str
    rate_rps: float
    product: str
    replicas_needed: int
    gpus_needed: int
    capacity_replicas: int
    capacity_gpus: int
    capacity_rps: float
    limit: str
    profile: str = ""  # the per-replica rate counted on and its source (``sizing_profile``)

    @property
    def fits(self) -> bool:
        return self.replicas_needed <= self.capacity_replicas

    def warning(self) -> str:
        """One line for an operator (no ``warning:`` prefix); '' when the capacity holds it."""
        if self.fits:
            return ""
        counted = f" at {self.profile}" if self.profile else ""
        return (f"{self.model} at {rps_text(self.rate_rps)} rps needs {self.replicas_needed} "
                f"replicas on {self.gpus_needed} {self.product} GPUs, but {self.limit} holds at "
                f"most {self.capacity_replicas} replicas on {self.capacity_gpus} GPUs "
                f"({rps_text(round(self.capacity_rps, 1))} rps{counted}); the hint is stored "
                "and the loop will scale the model as far as that allows")


def sizing_profile(shape: ReplicaShape, recorded: ProfileCorrection | None,
                   corrects: bool) -> tuple[ReplicaShape, str]:
    """``shape`` with the per-replica rate the loop sizes it with, and the words saying which:
    with correction on (``corrects``), the profile the last tick corrected (``recorded``, the
    model's correction of the newest tick with profiles: each tick starts from it), as a
    factor of the offline one (the shape's own, for the pools counted); else the offline one."""
    offline_rps = shape.per_replica_rps
    offline = rps_text(round(offline_rps, 2))
    if not corrects:
        return shape, (f"{offline} rps per replica: the offline profile, "
                       "autoscaling.profile_correction is off")
    if recorded is None or not recorded.is_corrected:
        return shape, (f"{offline} rps per replica: the offline profile, no tick has recorded "
                       "a correction of it")
    corrected_rps = offline_rps * recorded.factor
    return replace(shape, per_replica_rps=corrected_rps), (
        f"{rps_text(round(corrected_rps, 2))} rps per replica: the profile the last tick "
        f"corrected online, {recorded.factor:.3g}x the offline {offline}")


def gpus_for(shape: ReplicaShape, replicas: int) -> int:
    """Whole GPUs ``replicas`` of one shape take on their own (``floor(1 / share)`` to a
    shared GPU; a replica of several GPUs takes them whole), as ``sizing.pack_gpus`` packs."""
    return math.ceil(replicas / shape.per_gpu) * shape.whole_gpus


def _replicas_in(shape: ReplicaShape, gpus: int) -> int:
    return (max(0, gpus) // shape.whole_gpus) * shape.per_gpu


def _pool_gpus(shape: ReplicaShape, pool: PoolSpec, nodes: int) -> int:
    """GPUs of ``nodes`` nodes of ``pool`` the shape can use: a replica of several GPUs runs
    on one node, so a node holds ``floor(gpus_per_node / whole_gpus)`` of them."""
    return nodes * (pool.gpus_per_node // shape.whole_gpus) * shape.whole_gpus


def _cluster_gpus(shape: ReplicaShape, pools: Sequence[PoolSpec], budget_gpus: int) -> int:
    """GPUs of the shape's product the cluster budget leaves it: the budget less the other
    products' pools at ``min_nodes`` (never scaled below), in whole nodes of its own pools."""
    mine = sorted((p for p in pools if p.product == shape.product),
                  key=lambda p: (-p.gpus_per_node, p.name))
    left = budget_gpus - sum(p.min_nodes * p.gpus_per_node for p in pools
                             if p.product != shape.product)
    held = 0
    for pool in mine:
        nodes = min(pool.max_nodes, max(0, left) // pool.gpus_per_node)
        held += _pool_gpus(shape, pool, nodes)
        left -= nodes * pool.gpus_per_node
    return held


def hint_capacity(model: str, rate_rps: float, shape: ReplicaShape, target_utilization: float,
                  pools: Sequence[PoolSpec], budgets: Budgets) -> HintCapacity:
    """What a hint of ``rate_rps`` on ``model`` (replicas of ``shape``) needs, and what its
    product's ``pools`` at ``max_nodes`` and the ``budgets`` hold for it alone; the binding
    limit in the order the tick applies them (tenant budget, pools, cluster budget), a later
    one only when strictly smaller."""
    if not 0 < target_utilization <= 1:
        raise ValueError(f"target_utilization must be in (0, 1], got {target_utilization}")
    needed = replicas_for(rate_rps / target_utilization, shape.per_replica_rps)
    limits: list[tuple[int, str]] = []
    tenant_budget = dict(budgets.tenant_gpus).get(shape.tenant)
    if tenant_budget is not None:
        limits.append((math.floor(tenant_budget + _EPS), f"{TENANT_BUDGET}:{shape.tenant}"))
    mine = [p for p in pools if p.product == shape.product]
    limits.append((sum(_pool_gpus(shape, p, p.max_nodes) for p in mine),
                   f"{POOL_MAX_NODES}:{'+'.join(p.name for p in mine)}" if mine
                   else f"{NO_POOL}:{shape.product}"))
    if budgets.cluster_gpus is not None:
        limits.append((_cluster_gpus(shape, pools, budgets.cluster_gpus), CLUSTER_BUDGET))
    gpus, limit = limits[0]
    for other_gpus, other in limits[1:]:
        if other_gpus < gpus:
            gpus, limit = other_gpus, other
    replicas = _replicas_in(shape, gpus)
    return HintCapacity(model, rate_rps, shape.product, needed, gpus_for(shape, needed),
                        replicas, gpus_for(shape, replicas),
                        replicas * shape.per_replica_rps * target_utilization, limit)


@dataclass(frozen=True, slots=True)
class HintCheck:
    """What is said of a hint as it is added (``headroom hint add``, AddHint): whether the known
    capacity holds it (None: no pools known, or the model no longer listed) and its model's
    pause (None: not paused), which holds the replicas whatever the hint asks."""

    capacity: HintCapacity | None = None
    pause: ModelPause | None = None

    def warnings(self) -> tuple[str, ...]:
        """One line each (no ``warning:`` prefix): the capacity's, the pause's."""
        return tuple(w for w in (None if self.capacity is None else self.capacity.warning(),
                                 None if self.pause is None else self.pause.hint_warning())
                     if w)


@dataclass(frozen=True, slots=True)
class CappedHint:
    """A tick at which a GPU budget or pool (``limit``, the cut's reason) kept ``model`` below
    the hint in force: ``replicas`` sized for ``served_rps`` of the ``announced_rps``."""

    model: str
    announced_rps: float
    served_rps: float
    replicas: int
    limit: str

    def reason(self) -> str:
        """The replica target's reason: the cut's, the hint and the rates after it."""
        return (f"{self.limit}{HINT_CAPPED}:{self.served_rps:.0f}/"
                f"{self.announced_rps:.0f}rps")

    def note(self) -> str:
        """The tick record's note (``headroom status`` shows it under the last tick)."""
        return (f"demand hint on {self.model}: {rps_text(self.announced_rps)} rps announced, "
                f"{self.replicas} replicas sized for {self.served_rps:.0f} rps: capped by "
                f"{self.limit}")


@dataclass(frozen=True, slots=True)
class CappedTicks:
    """The ticks of a run (``headroom simulate``) at which a model's hint was capped, and the
    worst of them: the lowest share of the announced rate served."""

    ticks: int = 0
    worst: CappedHint | None = None

    def add(self, capped: CappedHint) -> CappedTicks:
        worse = self.worst is None or (capped.served_rps / capped.announced_rps
                                       < self.worst.served_rps / self.worst.announced_rps)
        return CappedTicks(self.ticks + 1, capped if worse else self.worst)

    def summary(self) -> dict[str, object]:
        """The simulate summary's entry: ticks, and the worst tick's rates and limit."""
        worst = self.worst
        return {"ticks": self.ticks} | ({} if worst is None else {
            "announced_rps": round(worst.announced_rps, 3),
            "served_rps": round(worst.served_rps, 3), "replicas": worst.replicas,
            "limit": worst.limit})


def capped_hints(demands: Sequence[Demand], requests: Sequence[ModelRequest],
                 budget_cuts: Sequence[tuple[str, str]], hint_rps: Mapping[str, float],
                 per_replica_rps: Mapping[str, float], target_utilization: float
                 ) -> tuple[CappedHint, ...]:
    """The models whose demand a hint raised (reason ending ``+demand_hint``), whose serving
    replicas a GPU budget or pool cut (``budget_cuts``) and whose kept ``requests`` are sized
    below the hint in force (``hint_rps``, by model: ``hint_floors``): a cut of the tail above
    an announced rate that still holds it is no cap of the hint."""
    cuts = dict(budget_cuts)
    hot = {r.model: r.hot for r in requests}
    found = []
    for demand in demands:
        announced, limit = hint_rps.get(demand.model, 0.0), cuts.get(demand.model)
        if limit is None or not demand.reason.endswith(HINTED) or announced <= 0:
            continue
        kept = hot.get(demand.model, 0)
        served = kept * per_replica_rps[demand.model] * target_utilization
        if served + _EPS < announced:
            found.append(CappedHint(demand.model, announced, served, kept, limit))
    return tuple(found)


def with_capped_reasons(budget_cuts: Sequence[tuple[str, str]],
                        capped: Sequence[CappedHint]) -> tuple[tuple[str, str], ...]:
    """``budget_cuts`` (model, reason) with a capped hint's reason for its model."""
    by_model = {c.model: c.reason() for c in capped}
    return tuple((model, by_model.get(model, reason)) for model, reason in budget_cuts)


def hints_capped(sizing: Sizing, hinted: HintedInputs, models: Sequence[FleetModel],
                 policy: DemandPolicy) -> tuple[Sizing, tuple[CappedHint, ...]]:
    """``sizing`` with its demands tagged where a hint raised them and, for each model a GPU
    budget or pool kept below its hint, the cut's reason naming the hint (``CappedHint.reason``);
    and those capped hints. The reconcile loop and ``headroom simulate`` both run it."""
    sizing = replace(sizing, demands=hinted.tagged(sizing.demands, policy,
                                                   sizing.hint_outsized))
    capped = capped_hints(sizing.demands, sizing.requests, sizing.budget_cuts, hinted.floors,
                          {m.spec.name: m.shape.per_replica_rps for m in models},
                          policy.target_utilization)
    if not capped:
        return sizing, ()
    return replace(sizing, budget_cuts=with_capped_reasons(sizing.budget_cuts, capped)), capped


@dataclass(frozen=True, slots=True)
class KnownCapacity:
    """The capacity a front end knows from its settings (``serve``'s: node pools, GPU budgets
    and the target utilization the loop sizes for), to check a hint against as it is added."""

    pools: tuple[PoolSpec, ...]
    budgets: Budgets
    target_utilization: float
    corrects_profiles: bool = True  # autoscaling.profile_correction.enabled

    def check(self, model: str, rate_rps: float, shape: ReplicaShape,
              recorded: ProfileCorrection | None = None) -> HintCapacity:
        """``shape`` (its offline profile) as the loop sizes it (``sizing_profile``: with
        ``recorded``, the model's profile the last tick recorded) against the pools and
        budgets."""
        sized, profile = sizing_profile(shape, recorded, self.corrects_profiles)
        return replace(hint_capacity(model, rate_rps, sized, self.target_utilization,
                                     self.pools, self.budgets), profile=profile)
