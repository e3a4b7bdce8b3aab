"""Sizing without PlanFleet: replicas per model -> GPUs per product, warm GPUs, budgets (pure).

Used when the models give per-replica throughput and GPU share directly (``headroom simulate``).
Replicas of one shape pack ``floor(1 / share)`` to a GPU; the partly filled GPUs of different
models are then combined first-fit decreasing. The result is a ``FleetPlacement``, the same value
the scheduler's PlanFleet returns, so ``desired_state`` and the planner treat both alike.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate

from controlplane.autoscaling.nodepools import clamp_nodes_to_budget
from controlplane.domain.desired import PoolSpec, desired_state
from controlplane.domain.placement import FleetPlacement, PlacedSegment, WarmGpus

TENANT_BUDGET = "tenant_gpu_budget"
CLUSTER_BUDGET = "cluster_gpu_budget"
POOL_MAX_NODES = "pool_max_nodes"  # :<pool>, the pool that cannot hold more of the product
WARM_POOL_LADDER = "warm_pool_ladder"
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class ReplicaShape:
    model: str
    tenant: str
    product: str
    gpu_share: float  # fraction of one GPU a replica occupies; whole numbers > 1: GPUs on one node
    per_replica_rps: float
    idle_gpu_fraction: float = 1.0  # share of gpu_share an idle (loaded, unrouted) replica keeps

    def __post_init__(self) -> None:
        if self.gpu_share <= 0 or (self.gpu_share > 1 and self.gpu_share != int(self.gpu_share)):
            raise ValueError(f"model {self.model!r}: gpu_share must be in (0, 1] or whole GPUs")
        if self.per_replica_rps <= 0:
            raise ValueError(f"model {self.model!r}: per_replica_rps must be > 0")
        if not 0 <= self.idle_gpu_fraction <= 1:
            raise ValueError(f"model {self.model!r}: idle_gpu_fraction must be in [0, 1]")

    @property
    def per_gpu(self) -> int:
        """Replicas that share one GPU (1 for whole-GPU and multi-GPU replicas)."""
        return max(1, math.floor(1 / self.gpu_share + _EPS))

    @property
    def whole_gpus(self) -> int:
        """GPUs one replica takes when it needs more than one (else 1)."""
        return max(1, round(self.gpu_share)) if self.gpu_share > 1 else 1


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Replicas one model should have per rung of the warm-pool ladder."""

    model: str
    hot: int
    idle: int = 0
    cached: int = 0
    reason: str = ""

    def gpus(self, shape: ReplicaShape) -> float:
        return shape.gpu_share * (self.hot + self.idle * shape.idle_gpu_fraction + self.cached)


def placed_gpus(requests: Sequence[ModelRequest], shapes: Mapping[str, ReplicaShape]) -> int:
    """Whole GPUs ``fleet_placement`` gives ``requests``: the hot replicas packed per product
    (``pack_gpus``: a slice that does not fit beside another takes a GPU of its own) plus the
    warm GPUs. A budget counts these, not the sum of GPU shares: three replicas of 0.6 are 1.8
    GPU shares but take 3 GPUs."""
    total = sum(w.gpus for w in warm_gpus(requests, shapes))
    hot: dict[str, int] = {}  # a model's requests count together (``tenant_budget_holds``)
    for r in requests:
        hot[r.model] = hot.get(r.model, 0) + r.hot
    for product in {shapes[m].product for m in hot}:
        mine = [m for m in hot if shapes[m].product == product]
        total += len(pack_gpus([shapes[m] for m in mine], [hot[m] for m in mine]))
    return total


def _nodes_hold(requests: Sequence[ModelRequest], shapes: Mapping[str, ReplicaShape],
                pools: Sequence[PoolSpec], cluster_budget_gpus: int) -> bool:
    """Whether the whole nodes the placement of ``requests`` needs survive the cluster budget
    (``clamp_nodes_to_budget`` removes none of them)."""
    desired = desired_state(fleet_placement(requests, shapes), pools, ())
    clamped = clamp_nodes_to_budget(desired, pools, cluster_budget_gpus)
    return [t.value for t in clamped.pools] == [t.value for t in desired.pools]


_Counts = tuple[int, int, int]  # (hot, idle, cached) of one model


def _units(counts: _Counts, shape: ReplicaShape, rungs: Sequence[str]) -> int:
    """Units ``_trim`` can take from ``counts`` in ``rungs`` (an idle unit only if it costs)."""
    hot, idle, cached = counts
    return sum({"hot": hot, "cached": cached,
                "idle": idle if shape.idle_gpu_fraction > 0 else 0}[rung] for rung in rungs)


def _trimmed(counts: _Counts, shape: ReplicaShape, rungs: Sequence[str], units: int) -> _Counts:
    """``counts`` after ``units`` calls of ``_trim`` with ``rungs`` (each its first rung left)."""
    left = {"hot": counts[0], "idle": counts[1], "cached": counts[2]}
    for rung in rungs:
        if rung == "idle" and shape.idle_gpu_fraction <= 0:
            continue
        taken = min(units, left[rung])
        left[rung] -= taken
        units -= taken
    return left["hot"], left["idle"], left["cached"]


def _share(counts: _Counts, shape: ReplicaShape) -> float:
    """``ModelRequest.gpus`` of ``counts`` (the same arithmetic, so the same float)."""
    return shape.gpu_share * (counts[0] + counts[1] * shape.idle_gpu_fraction + counts[2])


def _trim_runs(counts: dict[str, _Counts], shapes: Mapping[str, ReplicaShape],
               members: Sequence[str], rungs: Sequence[str]) -> list[tuple[str, int]]:
    """The units ``_trim`` would take one by one, each from the member holding the most GPU
    share (ties: the greater name), until none is left, as runs (member, units in a row): a
    member keeps the turn while it still holds more than the next (its share only falls), so a
    run is found by bisection, not unit by unit."""
    now = {m: counts[m] for m in members}
    runs: list[tuple[str, int]] = []
    while True:
        ranked = sorted(((_share(now[m], shapes[m]), m) for m in members
                         if _units(now[m], shapes[m], rungs) > 0), reverse=True)
        if not ranked:
            return runs
        top, shape = ranked[0][1], shapes[ranked[0][1]]
        units = _units(now[top], shape, rungs)
        if len(ranked) > 1:  # the last j with top still ahead after j units: it takes j + 1
            def ahead(j: int, top: str = top, shape: ReplicaShape = shape,
                      second: tuple[float, str] = ranked[1]) -> bool:
                return (_share(_trimmed(now[top], shape, rungs, j), shape), top) > second

            low, step = 0, 1  # galloping: a run of one (models taking turns) costs one check
            while low + step < units and ahead(low + step):
                low, step = low + step, step * 2
            high = min(low + step, units) - 1
            while low < high:
                mid = (low + high + 1) // 2
                low, high = (mid, high) if ahead(mid) else (low, mid - 1)
            units = low + 1
        now[top] = _trimmed(now[top], shape, rungs, units)
        runs.append((top, units))


class _Runs:
    """``_trim_runs`` indexed so the state after any number of units is found in a few
    bisections (trims of one member compose: ``_trimmed`` of a then b units is of a + b)."""

    def __init__(self, runs: Sequence[tuple[str, int]]) -> None:
        self.members = [m for m, _ in runs]
        self.ends = list(accumulate(units for _, units in runs))  # units done after each run
        self.total = self.ends[-1] if self.ends else 0
        self.mine: dict[str, tuple[list[int], list[int]]] = {}  # member: run indexes, its units
        for i, (member, units) in enumerate(runs):
            indexes, done = self.mine.setdefault(member, ([], []))
            indexes.append(i)
            done.append((done[-1] if done else 0) + units)

    def after(self, counts: Mapping[str, _Counts], shapes: Mapping[str, ReplicaShape],
              rungs: Sequence[str], units: int) -> dict[str, _Counts]:
        """``counts`` after the first ``units`` units of the runs."""
        state = dict(counts)
        if units <= 0:
            return state
        cut = bisect_left(self.ends, units)  # the run the units end in
        for member, (indexes, done) in self.mine.items():
            before = bisect_left(indexes, cut)  # this member's runs wholly before the cut
            taken = done[before - 1] if before else 0
            if self.members[cut] == member:
                taken += units - (self.ends[cut - 1] if cut else 0)
            state[member] = _trimmed(counts[member], shapes[member], rungs, taken)
        return state


def _clamp(requests: dict[str, ModelRequest], shapes: Mapping[str, ReplicaShape],
           members: Sequence[str], budget_gpus: float, reason: str,
           pools: Sequence[PoolSpec] = (), fixed: Sequence[ModelRequest] = ()) -> None:
    """Warm rungs (cached, then idle) of every member before any serving replica, each unit
    from the member holding the most GPU share, until the members' placed GPUs fit (and with
    ``pools``, the whole nodes they need). ``fixed`` requests (paused models) count toward the
    fit and are never trimmed.

    The order the units go in does not depend on the budget (``_trim_runs``), and fewer
    replicas never take more GPUs or nodes, so the first count of units after which the members
    fit is found by bisection: a few packings (``pack_gpus``) per rung, however many replicas a
    demand asks for, not one per unit."""
    counts = {m: (requests[m].hot, requests[m].idle, requests[m].cached) for m in members}

    def fits(state: Mapping[str, _Counts]) -> bool:
        mine = [replace(requests[m], hot=state[m][0], idle=state[m][1], cached=state[m][2])
                for m in members] + list(fixed)
        return placed_gpus(mine, shapes) <= budget_gpus + _EPS and (
            not pools or _nodes_hold(mine, shapes, pools, math.floor(budget_gpus + _EPS)))

    for rungs in (("cached", "idle"), ("hot",)):
        if fits(counts):
            break
        runs = _Runs(_trim_runs(counts, shapes, members, rungs))
        total = runs.total
        if fits(runs.after(counts, shapes, rungs, total)):
            low, high = 0, total  # the first count that fits: above low, at most high
            while high - low > 1:
                mid = (low + high) // 2
                if fits(runs.after(counts, shapes, rungs, mid)):
                    high = mid
                else:
                    low = mid
            total = high
        counts = runs.after(counts, shapes, rungs, total)
    for m in members:
        if counts[m] != (requests[m].hot, requests[m].idle, requests[m].cached):
            requests[m] = replace(requests[m], hot=counts[m][0], idle=counts[m][1],
                                  cached=counts[m][2], reason=reason)


def apply_gpu_budgets(
    requests: Sequence[ModelRequest],
    shapes: Mapping[str, ReplicaShape],
    tenant_budgets: Mapping[str, float],
    cluster_budget_gpus: float | None,
    pools: Sequence[PoolSpec] = (),
    held: frozenset[str] = frozenset(),
) -> tuple[ModelRequest, ...]:
    """Trim requests to each tenant's GPU budget, then to the cluster's, counted in the whole
    GPUs the placement would take (``placed_gpus``; a tenant's models packed on their own): warm
    rungs of every model go before any serving replica (an idle rung that keeps no GPU share is
    never trimmed), always from the model holding the most GPU share; trimmed requests carry
    the budget reason. With ``pools``, each product's requests are also trimmed to the GPUs its
    pools hold at ``max_nodes`` (reason ``pool_max_nodes:<pool>``): PlanFleet leaves a model it
    cannot serve in full unplaced, which would scale it to zero, so a model over what the pools
    can ever hold keeps what they hold instead (e.g. after an operator lowered ``max_nodes``);
    and the cluster budget keeps the whole nodes the placement needs (a budget that is not
    whole nodes would otherwise take a node away from replicas it let through). Without budgets
    or pools the requests come back as they are. The ``held`` models (paused) count in every
    budget and pool but are never trimmed: the others are, for them; only held models that
    alone are over what their pools can ever hold are trimmed to it, as PlanFleet would
    otherwise leave them unplaced and scale them to zero (their replica target stays held)."""
    by_model = {r.model: r for r in requests}
    fixed = [by_model[m] for m in by_model if m in held]

    def clamp(group: Sequence[str], budget: float, reason: str,
              with_pools: Sequence[PoolSpec] = ()) -> None:
        _clamp(by_model, shapes, [m for m in group if m not in held], budget, reason,
               with_pools, [r for r in fixed if r.model in group])

    for tenant, budget in sorted(tenant_budgets.items()):
        clamp([m for m in by_model if shapes[m].tenant == tenant], budget,
              f"{TENANT_BUDGET}:{tenant}")
    for product, (names, max_gpus) in sorted(_pool_capacity(pools).items()):
        group = [m for m in by_model if shapes[m].product == product]
        clamp(group, max_gpus, f"{POOL_MAX_NODES}:{'+'.join(names)}")
        _clamp(by_model, shapes, [m for m in group if m in held], max_gpus,
               f"{POOL_MAX_NODES}:{'+'.join(names)}", (),
               [by_model[m] for m in group if m not in held])
    if cluster_budget_gpus is not None:
        clamp(list(by_model), cluster_budget_gpus, CLUSTER_BUDGET, pools)
    return tuple(by_model[r.model] for r in requests)


def tenant_budget_holds(
    requests: Sequence[ModelRequest],
    shapes: Mapping[str, ReplicaShape],
    tenant_budgets: Mapping[str, float],
    replicas: Mapping[str, tuple[int, int]],
    held: frozenset[str] = frozenset(),
) -> dict[str, tuple[int, str]]:
    """Model -> (replicas, ``tenant_gpu_budget:<tenant>``) of each model whose scale-up the
    guards allow would take its tenant over its GPU budget, counting the replicas the guards
    keep: ``replicas`` gives each model's (replicas it has, replicas the guards allow), e.g. a
    scale-down the disruption budget holds back. Only what the scale-ups add is trimmed (each
    unit from the model adding the most GPU share, as ``apply_gpu_budgets`` trims), never a
    model's replicas nor its warm rungs (``requests``, counted as they are), nor a paused
    (``held``) model's; a tenant over its budget without its scale-ups gets none of them."""
    by_model = {r.model: r for r in requests if r.model in replicas}
    found: dict[str, tuple[int, str]] = {}
    for tenant, budget in sorted(tenant_budgets.items()):
        mine = [m for m in by_model if shapes[m].tenant == tenant]
        ups = {m: ModelRequest(m, replicas[m][1] - replicas[m][0]) for m in mine
               if m not in held and replicas[m][1] > replicas[m][0]}
        if not ups:
            continue
        kept = [replace(by_model[m], hot=replicas[m][0] if m in ups else replicas[m][1])
                for m in mine]
        reason = f"{TENANT_BUDGET}:{tenant}"
        _clamp(ups, shapes, list(ups), budget, reason, (), kept)
        found |= {m: (replicas[m][0] + r.hot, reason) for m, r in ups.items() if r.reason}
    return found


def _pool_capacity(pools: Sequence[PoolSpec]) -> dict[str, tuple[list[str], int]]:
    """Product -> (its pools, the GPUs they hold at ``max_nodes``)."""
    capacity: dict[str, tuple[list[str], int]] = {}
    for pool in pools:
        names, gpus = capacity.get(pool.product, ([], 0))
        capacity[pool.product] = ([*names, pool.name], gpus + pool.max_nodes * pool.gpus_per_node)
    return capacity


def budget_cuts(requests: Sequence[ModelRequest], trimmed: Sequence[ModelRequest]
                ) -> tuple[tuple[str, str], ...]:
    """(model, budget reason) of each model whose serving (hot) replicas ``apply_gpu_budgets``
    cut from ``requests`` to ``trimmed`` (same order); a cut of warm rungs alone is not one."""
    return tuple((after.model, after.reason)
                 for before, after in zip(requests, trimmed, strict=True)
                 if after.hot < before.hot)


def pack_gpus(shapes: Sequence[ReplicaShape], counts: Sequence[int]) -> list[list[int]]:
    """GPUs of one product as lists of indices into ``shapes``: one entry per replica on the GPU
    it starts on; a replica of k whole GPUs is followed by k - 1 empty GPUs."""
    gpus: list[list[int]] = []
    partial: list[tuple[float, int, int]] = []  # (share, shape index, replicas)
    for i, (shape, count) in enumerate(zip(shapes, counts, strict=True)):
        if shape.whole_gpus > 1:
            for _ in range(count):
                gpus.extend([[i], *([] for _ in range(shape.whole_gpus - 1))])
            continue
        full, rest = divmod(count, shape.per_gpu)
        gpus.extend([i] * shape.per_gpu for _ in range(full))
        if rest:
            partial.append((shape.gpu_share, i, rest))
    free: list[float] = []
    first_partial = len(gpus)
    for share, i, rest in sorted(partial, reverse=True):
        for _ in range(rest):
            slot = next((g for g, room in enumerate(free) if room >= share - _EPS), None)
            if slot is None:
                free.append(1.0)
                gpus.append([])
                slot = len(free) - 1
            free[slot] -= share
            gpus[first_partial + slot].append(i)
    return gpus


def fleet_placement(requests: Sequence[ModelRequest], shapes: Mapping[str, ReplicaShape],
                    revision: int = 0) -> FleetPlacement:
    """Hot replicas as placed segments on numbered GPUs; idle and cached rungs as warm GPUs. A
    replica of k whole GPUs is placed as PlanFleet places one: a segment on each of its k GPUs
    (one after another, ``pack_gpus``), ``gpu_index`` 0..k-1, each with 1/k of its throughput,
    so ``desired_state`` holds its k GPUs on one node and the replica counts once."""
    segments: list[PlacedSegment] = []
    ids: list[tuple[str, tuple[str, ...]]] = []
    for product in sorted({shapes[r.model].product for r in requests}):
        mine = [r for r in requests if shapes[r.model].product == product]
        mine_shapes = [shapes[r.model] for r in mine]
        gpus = pack_gpus(mine_shapes, [r.hot for r in mine])
        gpu_ids = tuple(f"{product}-{g}" for g in range(len(gpus)))
        for first, members in enumerate(gpus):
            for i in members:
                shape = mine_shapes[i]
                k = shape.whole_gpus
                segments.extend(PlacedSegment(shape.model, gpu_ids[first + j], product, "sized",
                                              "", 0, 0, shape.per_replica_rps / k, gpus=k,
                                              gpu_index=j) for j in range(k))
        ids.append((product, gpu_ids))
    return FleetPlacement(revision, tuple(segments), tuple(ids), warm_gpus(requests, shapes),
                          0.0, ())


def warm_gpus(requests: Sequence[ModelRequest], shapes: Mapping[str, ReplicaShape]
              ) -> tuple[WarmGpus, ...]:
    """Whole GPUs per product that hold the idle and cached rungs (warm capacity)."""
    warm: list[WarmGpus] = []
    for product in sorted({shapes[r.model].product for r in requests}):
        share = sum(r.gpus(shapes[r.model]) - r.hot * shapes[r.model].gpu_share
                    for r in requests if shapes[r.model].product == product)
        if share > _EPS:
            warm.append(WarmGpus(product, math.ceil(share - _EPS), WARM_POOL_LADDER))
    return tuple(warm)
