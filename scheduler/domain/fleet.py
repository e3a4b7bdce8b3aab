"""Batch fleet planning (PlanFleet): choose segments per model and pack them onto the fewest /
cheapest GPUs with valid MIG geometry, preferring to keep the previous plan's GPU layouts.

The packing is a small integer program over *layouts* (multisets of segment sizes with a valid
MIG geometry) solved through the ``MilpSolver`` port; a first-fit-decreasing greedy is the
fallback when no solver is given, it finds nothing in time, or its time-limited incumbent
leaves more models short (or costs more) than the greedy packing:

    minimise   sum price x GPUs + tiny x (new GPUs) + tinier x (segments of kept GPUs moved)
               + tiniest x (time-slices) + big x (unplaced models)
               (a pool of several GPUs per node that may time-slice: price x GPUs per node x
               nodes, each k-way time-sliced kind and the rest on whole nodes of their own)
    subject to segments of size g on pool p   <= instances of size g the chosen layouts offer
               sum throughput of a model's segments >= its rate (unless it is left unplaced)
               GPUs of a pool <= its max_gpus
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from scheduler.domain import catalog
from scheduler.domain.cluster import product_key
from scheduler.domain.fleet_greedy import KEEP_MIN_FILLS, pack_greedy
from scheduler.domain.fleet_layout import (
    Packing,
    PriorGpu,
    churn,
    gpu_instances,
    holdings,
    lay_out,
    prior_gpus,
)
from scheduler.domain.fleet_options import (
    WHOLE,
    PoolInfo,
    SegmentOption,
    memory_shortfall,
    options_for,
    pool_infos,
    time_slices,
)
from scheduler.domain.fleet_types import (
    FleetPlan,
    FleetRequest,
    GpuAssignment,
    GpuPool,
    ModelDemand,
)
from scheduler.domain.milp import Milp, MilpSolver
from scheduler.domain.model import Isolation
from scheduler.domain.sharing import allows_mps, mps_client_limit
from scheduler.domain.warm_pool import ServedModel, size_warm_pools

DEFAULT_TIME_LIMIT_S = 10.0
#: Cap of a coverage coefficient (throughput / rate) in the integer program: bigger values only
#: say that one segment covers the rate many times over, and solvers reject huge coefficients.
MAX_COVER = 1e6
POOL_TOO_SMALL = "pool_max_gpus (not enough GPUs in the pools to serve it)"


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    plan: FleetPlan
    solver_used: str  # "milp", "milp_time_limited", "greedy"
    relaid_out: int  # GPUs of the previous plan whose layout changed
    moved: int = 0  # segments of the previous plan's GPUs kept as they were that changed


def plan_fleet(request: FleetRequest, revision: int, previous: FleetPlan | None = None,
               solver: MilpSolver | None = None,
               time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> PlanOutcome:
    """A fleet plan for ``request`` (pure; the solver is the only collaborator). Its warm
    pools are the request's own when it decided them (the control plane's ladder: the plan
    served and journaled is then the one the loop records and bills), else sized here."""
    pools = pool_infos(request.pools)
    options: dict[str, list[SegmentOption]] = {}
    unplaced: list[str] = []
    for demand in request.models:
        if demand.rate_rps <= 0:
            continue
        usable = options_for(demand, pools)
        opts = [o for o in usable if _pool_can_hold(pools[o.pool], o, demand.rate_rps)]
        if opts:
            options[demand.model] = opts
        elif usable:
            unplaced.append(f"{demand.model}: {POOL_TOO_SMALL}")
        else:
            unplaced.append(f"{demand.model}: {_why_no_option(demand, pools)}")
    priors = prior_gpus(previous, pools)
    rates = {d.model: d.rate_rps for d in request.models}
    packing: Packing | None = None
    used = "greedy"
    if solver is not None and options:
        problem, decode = _build_milp(pools, options, rates, priors)
        result = solver.solve(problem, time_limit_s)
        if result is not None:
            packing = decode(result.values)
            used = "milp" if result.optimal else "milp_time_limited"
    planned = {model: rates[model] for model in options}
    if used != "milp":
        # a solver cut short may hold a feasible but poor incumbent (at worst: every model
        # unplaced); the greedy packing is cheap, so the better of the two is kept
        greedy = _best_greedy(pools, options, rates, priors, planned)
        if packing is None or (_rank(greedy, planned, pools, priors)
                               < _rank(packing, planned, pools, priors)):
            packing, used = greedy, "greedy"
    assert packing is not None
    for model in sorted(set(packing.unplaced) | _short_of_rate(packing, planned)):
        unplaced.append(f"{model}: {POOL_TOO_SMALL}")
    isolation = {d.model: d.isolation for d in request.models}
    gpus, relaid, moved = lay_out(pools, packing, priors, isolation)
    served = _served(request, pools, gpus)
    room: dict[str, int] = {}
    for info in pools:
        in_use = sum(1 for g in gpus if g.product == info.name)
        room[info.name] = room.get(info.name, 0) + info.pool.max_gpus - in_use
    warm = size_warm_pools(served, room) if request.warm is None else list(request.warm)
    price = {info.name: info.pool.price_per_gpu_hour for info in pools}
    cost = sum(price.get(g.product, 0.0) for g in gpus) + sum(
        price.get(w.product, 0.0) * w.gpus for w in warm)
    plan = FleetPlan(revision, tuple(gpus), tuple(warm), round(cost, 6), tuple(unplaced))
    return PlanOutcome(plan, used, relaid, moved)


def _best_greedy(pools: Sequence[PoolInfo], options: dict[str, list[SegmentOption]],
                 rates: dict[str, float], priors: Sequence[PriorGpu],
                 planned: dict[str, float]) -> Packing:
    """The greedy packing, tried with each fill of ``KEEP_MIN_FILLS``: the one that leaves
    the fewest models short, then the cheapest, then the one that re-lays out (or drains) the
    fewest previous GPUs."""
    fills = KEEP_MIN_FILLS if priors else (None,)
    tried = [pack_greedy(pools, options, rates, priors, fill) for fill in fills]
    return min(tried, key=lambda p: (*_rank(p, planned, pools, priors), churn(p, priors)))


def _rank(packing: Packing, rates: dict[str, float], pools: Sequence[PoolInfo],
          priors: Sequence[PriorGpu]) -> tuple[int, float]:
    """How good a packing is: models left short first, then the price per hour of its GPUs
    (new ones and the previous plan's it keeps)."""
    short = len(set(packing.unplaced) | _short_of_rate(packing, rates))
    price = sum(pools[pool].pool.price_per_gpu_hour * count
                for pool, _layout, count in packing.layouts)
    price += sum(pools[g.pool].pool.price_per_gpu_hour for g in priors
                 if g.gpu_id in packing.kept)
    return short, round(price, 9)


def _pool_can_hold(info: PoolInfo, option: SegmentOption, rate_rps: float) -> bool:
    """Whether the segments ``option`` needs for ``rate_rps`` fit in the pool at all (this
    also bounds the plan's size, whatever the rate and throughput)."""
    per_gpu = max(layout.count(option.size) for layout in info.layouts)
    needed = rate_rps / option.point.throughput_rps
    if option.gpus > 1 and math.isfinite(needed):  # whole replicas of several GPUs
        needed = option.segments_for(rate_rps)
    return math.isfinite(needed) and needed <= per_gpu * max(info.pool.max_gpus, 0)


def _short_of_rate(packing: Packing, rates: dict[str, float]) -> set[str]:
    """Models given to the packer that it neither marked unplaced nor served at their rate:
    never expected, but a plan must not drop a model silently."""
    capacity: dict[str, float] = {}
    for option, count in packing.segments:
        capacity[option.model] = (capacity.get(option.model, 0.0)
                                  + count * option.point.throughput_rps)
    return {model for model, rate in rates.items()
            if model not in packing.unplaced and capacity.get(model, 0.0) < rate * (1 - 1e-9)}


def _why_no_option(demand: ModelDemand, pools: Sequence[PoolInfo]) -> str:
    profile = demand.profile
    if not profile:
        return "no_profile (the model has no profile points)"
    if all(p.throughput_rps <= 0 for p in profile):
        return "no_profile_serves (every profiled shape has throughput 0)"
    products = {product_key(p.name) for p in pools}
    if not any(product_key(getattr(pt, "product", "")) in products for pt in profile):
        return "no_pool_for_profile (no pool offers a product the model was profiled on)"
    any_node = [replace(i, pool=replace(i.pool, gpus_per_node=0)) for i in pools]
    if any(p.gpus > 1 for p in profile) and options_for(demand, any_node):
        sizes = ", ".join(sorted({f"{p.gpus} GPUs of {p.product}" for p in profile
                                  if p.gpus > 1}))
        return ("replica_larger_than_node (a replica of several GPUs runs on one node, and no "
                f"pool of its product has nodes that hold a whole number of them: {sizes}; "
                "the pool's gpus_per_node must be a multiple of its GPUs)")
    served = [p for p in profile
              if p.throughput_rps > 0 and product_key(p.product) in products]
    if served and all(p.mps_processes > mps_client_limit(catalog.lookup(p.product),
                                                         p.compute_slices) for p in served):
        return ("no_profile_within_mps_client_limit (a profiled shape runs more MPS processes "
                "than its segment takes: 48 on a whole GPU, 48 x its compute slices / the "
                "GPU's on a MIG instance)")
    short = memory_shortfall(demand, pools)
    if short is not None:
        return ("no_profile_meets_slo (not enough GPU memory: every profiled shape with "
                "latency <= 0.45 x latency_slo_ms on a pool product needs more memory than CUDA "
                f"can use of it: {short})")
    if not allows_mps(demand.isolation) and options_for(
            replace(demand, isolation=Isolation.TRUSTED), pools):
        return (f"no_profile_for_isolation (isolation {demand.isolation.name} runs on a MIG "
                "instance or a whole GPU without MPS, and every profiled shape that meets "
                "latency <= 0.45 x latency_slo_ms on a pool product has mps_processes > 1)")
    return ("no_profile_meets_slo (no profiled shape has latency <= 0.45 x latency_slo_ms "
            "on a pool product with enough memory)")


def _build_milp(pools: Sequence[PoolInfo], options: dict[str, list[SegmentOption]],
                rates: dict[str, float], priors: Sequence[PriorGpu]
                ) -> tuple[Milp, Callable[[Sequence[float]], Packing]]:
    """The integer program and a function that turns its solution into a Packing."""
    m = Milp()
    top_price = max((p.pool.price_per_gpu_hour for p in pools), default=0.0)
    unit = max(top_price, 1.0)
    gpu_eps = 1e-3 * unit  # prefer fewer GPUs among equally priced plans
    new_eps = 1e-4 * unit  # prefer keeping the previous plan's layouts
    # prefer keeping a kept GPU's segments (model, size, batch, MPS) where they are: below a
    # layout kept (a kept GPU's segments, at most 7, weigh less than one re-laid-out GPU)
    moved_eps = new_eps / 8
    # prefer a MIG instance or a whole GPU to a time-slice where they cost the same GPUs: a
    # slice serves less (context switches) and its latency depends on its neighbours
    slice_eps = 1e-6 * unit
    # above the price of every GPU the pools may hold, also on whole nodes of each kind
    big = 10.0 * sum((p.pool.price_per_gpu_hour + 1.0) * max(p.pool.max_gpus, 0)
                     * max(p.pool.gpus_per_node, 1) for p in pools) + 1.0
    by_node = _priced_by_node(pools, options)

    def gpu_price(pool: int) -> float:
        return 0.0 if pool in by_node else pools[pool].pool.price_per_gpu_hour

    layout_vars: list[tuple[int, tuple[int, ...], int]] = []
    for k, info in enumerate(pools):
        for layout in info.layouts:
            var = m.var(f"x[{info.name},{layout}]", gpu_price(k) + gpu_eps + new_eps,
                        upper=max(info.pool.max_gpus, 0))
            layout_vars.append((k, layout, var))
    keep_vars = [m.var(f"keep[{g.gpu_id}]", gpu_price(g.pool) + gpu_eps, upper=1)
                 for g in priors]
    for k in sorted(by_node):
        gpus = [(layout, var) for kk, layout, var in layout_vars if kk == k]
        gpus += [(g.sizes, var) for g, var in zip(priors, keep_vars, strict=True) if g.pool == k]
        _node_rows(m, pools[k].pool, gpus)
    seg_vars: list[tuple[SegmentOption, int]] = []
    for model in sorted(options):
        for opt in options[model]:
            cap = opt.segments_for(rates[model])
            var = m.var(f"n[{model},{opt.pool},{opt.size}]",
                        slice_eps if opt.size < WHOLE else 0.0, upper=cap)
            seg_vars.append((opt, var))
            if opt.gpus > 1:  # the GPUs of whole replicas: n = gpus x replicas
                replicas = m.var(f"r[{model},{opt.pool}]", 0.0, upper=cap // opt.gpus)
                m.row({var: 1.0, replicas: -float(opt.gpus)}, lower=0.0, upper=0.0)
    skip_vars = {model: m.var(f"u[{model}]", big, upper=1) for model in sorted(options)}
    held = holdings(priors, [o for o, _ in seg_vars])
    for (opt, var), counts in zip(seg_vars, held, strict=True):
        if counts:  # moved >= this option's segments on the GPUs kept - the option's segments
            moved = m.var(f"moved[{opt.model},{opt.pool},{opt.size}]", moved_eps,
                          upper=float(sum(counts.values())))
            m.row({moved: 1.0, var: 1.0,
                   **{keep_vars[k]: -float(c) for k, c in counts.items()}}, lower=0.0)
    sizes = sorted({(o.pool, o.size) for o, _ in seg_vars})
    for pool, size in sizes:
        row: dict[int, float] = {v: 1.0 for o, v in seg_vars if (o.pool, o.size) == (pool, size)}
        for k, layout, var in layout_vars:
            if k == pool and layout.count(size):
                row[var] = -float(layout.count(size))
        for g, var in zip(priors, keep_vars, strict=True):
            if g.pool == pool and g.sizes.count(size):
                row[var] = -float(g.sizes.count(size))
        m.row(row, upper=0.0)
    for model in sorted(options):
        # sum(throughput x n) + rate x u >= rate, divided by the rate so that any rate is well
        # scaled for the solver (a coefficient far above 1 means one segment covers the rate)
        row = {v: min(MAX_COVER, o.point.throughput_rps / rates[model])
               for o, v in seg_vars if o.model == model}
        row[skip_vars[model]] = 1.0
        m.row(row, lower=1.0)
    for k, info in enumerate(pools):
        row = {var: 1.0 for kk, _, var in layout_vars if kk == k}
        row.update({var: 1.0 for g, var in zip(priors, keep_vars, strict=True) if g.pool == k})
        m.row(row, upper=float(max(info.pool.max_gpus, 0)))

    def decode(values: Sequence[float]) -> Packing:
        def count(var: int) -> int:
            return round(values[var])

        layouts = [(k, layout, count(var)) for k, layout, var in layout_vars if count(var)]
        kept = tuple(g.gpu_id for g, var in zip(priors, keep_vars, strict=True) if count(var))
        segments = [(o, count(v)) for o, v in seg_vars if count(v)]
        skipped = {model for model, var in skip_vars.items() if count(var)}
        segments = [(o, c) for o, c in segments if o.model not in skipped]
        return Packing(tuple(layouts), kept, tuple(segments), frozenset(skipped))

    return m, decode


def _priced_by_node(pools: Sequence[PoolInfo], options: dict[str, list[SegmentOption]]
                    ) -> set[int]:
    """The pools the integer program prices by node: those whose nodes hold several GPUs and
    where some model may be time-sliced (elsewhere GPUs are priced one by one, as before)."""
    return {o.pool for opts in options.values() for o in opts
            if o.size < WHOLE and pools[o.pool].pool.gpus_per_node > 1}


def _node_rows(m: Milp, pool: GpuPool, gpus: Sequence[tuple[tuple[int, ...], int]]) -> None:
    """Price ``pool`` by node: a node carries one device-plugin config, so the GPUs of each
    k-way time-sliced kind fill nodes of their own, and the rest (whole GPUs, MIG, MPS) theirs;
    each kind pays for whole nodes (the loop's node targets count them so). ``gpus`` are the
    pool's GPU variables with their layouts."""
    kinds: dict[int, dict[int, float]] = {}
    for layout, var in gpus:
        kinds.setdefault(time_slices(layout[0]), {})[var] = -1.0
    all_nodes: dict[int, float] = {}
    for kind, row in sorted(kinds.items()):
        nodes = m.var(f"nodes[{pool.product},{kind}]",
                      pool.price_per_gpu_hour * pool.gpus_per_node)
        m.row({**row, nodes: float(pool.gpus_per_node)}, lower=0.0)
        all_nodes[nodes] = 1.0
    # the pool's nodes (max_gpus of the control plane's request: max_nodes x GPUs per node)
    m.row(all_nodes, upper=float(math.ceil(max(pool.max_gpus, 0) / pool.gpus_per_node)))


def _served(request: FleetRequest, pools: Sequence[PoolInfo],
            gpus: Sequence[GpuAssignment]) -> list[ServedModel]:
    """Per model and pool: capacity and throughput per GPU of the plan's segments."""
    capacity: dict[tuple[str, str], float] = {}
    slices: dict[tuple[str, str], float] = {}
    for gpu in gpus:
        info = next(p for p in pools if p.name == gpu.product)
        for size, _, seg in gpu_instances(gpu.segments):
            key = (seg.model, gpu.product)
            capacity[key] = capacity.get(key, 0.0) + seg.throughput_rps
            slices[key] = slices.get(key, 0) + info.slices(size)
    cold = {d.model: d.cold_start_s for d in request.models}
    rate = {d.model: d.rate_rps for d in request.models}
    total: dict[str, float] = {}
    for (model, _), cap in capacity.items():
        total[model] = total.get(model, 0.0) + cap
    out: list[ServedModel] = []
    for (model, product), cap in sorted(capacity.items()):
        info = next(p for p in pools if p.name == product)
        per_gpu = cap / slices[(model, product)] * info.slices(WHOLE)
        share = rate[model] * (cap / total[model])  # the part of the rate this pool serves
        out.append(ServedModel(model, product, share, cap, per_gpu, cold[model]))
    return out
