"""Models the placement left unplaced: held where they serve, and said every tick (pure).

PlanFleet leaves a model it cannot serve (no pool offers a product it was profiled on, no
profiled shape meets its SLO, the pools cannot hold its rate) unplaced, with no segment, so its
replica target would be 0: a model serving traffic would be scaled away step by step, its
replicas' nodes with it, because of a configuration the operator can fix. Instead a model that
serves (replicas, and load measured above 0 or not measured) keeps the replicas it has, with
the reason ``unplaced_held:<reason code>``, and the planner keeps their nodes
(``DesiredState.held_unplaced``); each unplaced model gets a note on the tick's record, which
``headroom status`` and the dashboard's Overview show, as does a model no pool offers a
product of its profile for, whatever its demand (``headroom models import --config`` warns of
it too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from controlplane.domain.desired import UNPLACED, DesiredState, DesiredTarget, PoolSpec
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedModel, ObservedState
from controlplane.domain.placement import FleetPlacement
from scheduler.domain.cluster import product_key
from scheduler.domain.fleet_options import holds_replica

UNPLACED_HELD = "unplaced_held"  # :<reason code>, a model held at its replicas while unplaced


def serves(model: ObservedModel | None) -> bool:
    """Whether the model has replicas and load (measured above 0, or not measured: unknown)."""
    return model is not None and model.replicas_target > 0 and (
        not model.demand_measured or model.demand_rps > 0)


def _is_unplaced(target: DesiredTarget) -> bool:
    return target.reason == UNPLACED or target.reason.startswith(f"{UNPLACED}:")


def holding_unplaced(desired: DesiredState, observed: ObservedState) -> DesiredState:
    """``desired`` with each unplaced model that serves held at the replicas its workload
    has (never fewer than the placement gives it), reason ``unplaced_held:<reason code>``."""
    targets: list[DesiredTarget] = []
    held: list[str] = []
    for target in desired.replicas:
        seen = observed.model(target.target)
        if seen is not None and _is_unplaced(target) and serves(seen) \
                and seen.replicas_target > target.value:
            code = target.reason.removeprefix(UNPLACED).removeprefix(":")
            target = replace(target, value=seen.replicas_target,
                             reason=f"{UNPLACED_HELD}:{code}" if code else UNPLACED_HELD)
            held.append(target.target)
        targets.append(target)
    if not held:
        return desired
    return replace(desired, replicas=tuple(targets), held_unplaced=tuple(held))


def unplaced_notes(desired: DesiredState, placement: FleetPlacement) -> tuple[str, ...]:
    """One line per model ``placement`` left unplaced: why, and whether it is held."""
    notes = []
    for target in desired.replicas:
        why = placement.unplaced_why(target.target)
        if not why:
            continue
        if target.target in desired.held_unplaced:
            then = (f"held at the {target.value} replica(s) it has while it serves "
                    f"({target.reason}), not scaled to 0")
        else:
            then = f"{target.value} replica(s) planned"
        notes.append(f"model {target.target}: unplaced: {why}; {then}")
    return tuple(notes)


def no_pool_for(spec: ModelSpec, pools: Sequence[PoolSpec]) -> str:
    """Why no pool can run ``spec``, one line, as PlanFleet would leave it unplaced: no pool
    offers a product of its profile (``no_pool_for_profile``), or every point on a product a
    pool offers is a replica of more GPUs than those pools' nodes hold a whole number of
    (``replica_larger_than_node``); "" when one can."""
    if not spec.profiled_on([p.product for p in pools]):
        offered = ", ".join(f"{p.name}: {p.product}" for p in pools) or "none"
        return (f"model {spec.name}: no pool offers a product of its profile "
                f"({', '.join(sorted({p.product for p in spec.profile}))}; the pools offer "
                f"{offered}): the loop cannot place it (no_pool_for_profile)")
    offering = {point: [p for p in pools if product_key(p.product) == product_key(point.product)]
                for point in spec.profile}
    if any(holds_replica(p.gpus_per_node, point.gpus)
           for point, there in offering.items() for p in there):
        return ""
    held = sorted({f"{point.gpus} GPUs of {point.product}" for point, there in offering.items()
                   if there})
    nodes = sorted({f"{p.name}: {p.gpus_per_node}" for there in offering.values() for p in there})
    return (f"model {spec.name}: no pool's nodes hold a whole number of its replicas "
            f"({', '.join(held)}; GPUs per node of {', '.join(nodes)}): the loop cannot place "
            "it (replica_larger_than_node)")


def no_pool_notes(specs: Sequence[ModelSpec], pools: Sequence[PoolSpec],
                  placement: FleetPlacement) -> tuple[str, ...]:
    """``no_pool_for`` of each model ``placement`` did not already leave unplaced (it asked
    for none of it: no demand, or its load not measured)."""
    return tuple(line for s in specs
                 if not placement.unplaced_why(s.name) and (line := no_pool_for(s, pools)))
