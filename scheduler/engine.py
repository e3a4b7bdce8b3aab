"""PlacementEngine: thread-safe, in-memory placement state behind the gRPC API.

Methods take and return the generated proto messages so the control plane can call the engine
in-process with the same messages the gRPC API uses. Errors are the typed domain exceptions of
``scheduler.domain.errors``; nothing is half-applied when one is raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from protos.headroom.v1 import placement_pb2 as pb
from scheduler import convert
from scheduler.domain.errors import AlreadyExists, CallerGone, InvalidArgument
from scheduler.domain.fleet import DEFAULT_TIME_LIMIT_S, plan_fleet
from scheduler.domain.fleet_prior import prior_from_inventory
from scheduler.domain.fleet_types import FleetPlan
from scheduler.domain.milp import MilpSolver
from scheduler.domain.model import Binding
from scheduler.domain.placer import OnlinePlacer
from scheduler.domain.scoring import ScoreWeights
from scheduler.domain.validate import validate_fleet_request, validate_nodes
from scheduler.highs import HighsSolver
from scheduler.journal import PlacementJournal

#: Share of the caller's remaining deadline the fleet solver may use.
DEADLINE_SHARE = 0.8


class PlacementEngine:
    """Inventory, bindings and the current fleet plan (with its revision), under one lock.

    With a ``journal`` (``scheduler.journal``) the engine starts from what it recorded and
    records every change before it answers: the restored bindings wait for the first inventory
    (and count, and are found and released, meanwhile), the restored plan keeps its revision.
    """

    def __init__(self, weights: ScoreWeights | None = None,
                 solver: MilpSolver | None = None,
                 plan_time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                 journal: PlacementJournal | None = None) -> None:
        self._lock = threading.Lock()
        self._plan_changed = threading.Condition(self._lock)
        self._placer = OnlinePlacer((), weights)
        self._plan = FleetPlan(0, (), (), 0.0, ())
        self._solver: MilpSolver = solver or HighsSolver()
        self._plan_time_limit_s = plan_time_limit_s
        self._journal = journal
        # restored bindings not yet re-adopted: they wait for the first inventory
        self._restored: dict[str, Binding] = {}
        if journal is not None:
            contents = journal.take_over()
            self._restored = {b.workload_id: b for b in contents.bindings}
            if contents.plan is not None:
                self._plan = contents.plan

    # ---------------------------------------------------------------- online placement
    def sync_inventory(self, request: pb.SyncInventoryRequest) -> pb.SyncInventoryResponse:
        """Replace the inventory with a full snapshot; bindings on nodes and GPUs that still
        exist are kept (re-applied), the others are dropped. Idempotent."""
        nodes = convert.nodes_from_pb(request)
        validate_nodes(nodes)
        with self._lock:
            fresh = self._placer.resynced(nodes, tuple(self._restored.values()))
            if self._journal is not None:
                kept = fresh.cluster.bindings
                dropped = [w for w in (*self._placer.cluster.bindings, *self._restored)
                           if w not in kept]
                if dropped:
                    self._journal.released(dropped)
            self._placer, self._restored = fresh, {}
            return pb.SyncInventoryResponse(nodes=len(nodes), gpus=fresh.cluster.gpu_count)

    def place(self, request: pb.PlaceRequest) -> pb.PlaceResponse:
        """Bind one workload; raises InvalidArgument, AlreadyExists or Infeasible."""
        spec = convert.workload_from_pb(request)
        with self._lock:
            if spec.workload_id in self._restored:
                raise AlreadyExists(spec.workload_id)
            binding = self._placer.place(spec)
            if self._journal is not None:
                try:
                    self._journal.bound(binding)
                except BaseException:
                    self._placer.release(spec.workload_id)
                    raise
        return pb.PlaceResponse(binding=convert.binding_to_pb(binding))

    def release(self, request: pb.ReleaseRequest) -> pb.ReleaseResponse:
        """Free a workload's resources; unknown ids are fine (idempotent)."""
        if not request.workload_id:
            raise InvalidArgument("workload_id", "must not be empty")
        workload_id = request.workload_id
        with self._lock:
            known = workload_id in self._placer.cluster.bindings or workload_id in self._restored
            if known and self._journal is not None:
                self._journal.released([workload_id])
            self._placer.release(workload_id)
            self._restored.pop(workload_id, None)
        return pb.ReleaseResponse()

    def binding(self, workload_id: str) -> pb.Binding | None:
        """The current binding of a workload, or None."""
        with self._lock:
            found = (self._placer.cluster.bindings.get(workload_id)
                     or self._restored.get(workload_id))
        return convert.binding_to_pb(found) if found is not None else None

    # ---------------------------------------------------------------- fleet plan
    def plan_fleet(self, request: pb.PlanFleetRequest, previous: pb.FleetPlan | None = None,
                   time_limit_s: float | None = None,
                   still_wanted: Callable[[], bool] | None = None) -> pb.FleetPlan:
        """Compute a fleet plan, store it as the current plan with revision + 1 and return it.

        ``previous`` (default: the current plan; while there is none, the layouts the synced
        inventory says its GPUs hold) is the layout to stay close to: plans that re-lay out
        fewer GPUs are preferred. ``time_limit_s`` bounds the solver (e.g. the
        caller's remaining deadline). When ``still_wanted`` returns False once the plan is
        computed (the caller's deadline passed), nothing is stored and CallerGone is raised.
        """
        fleet_request = convert.fleet_request_from_pb(request)
        validate_fleet_request(fleet_request)
        with self._lock:
            if previous is not None:
                prior = convert.fleet_plan_from_pb(previous)
            elif self._plan.gpus:
                prior = self._plan
            else:  # no plan yet (e.g. a restart): keep what the fleet's GPUs hold
                prior = prior_from_inventory(self._placer.cluster.nodes)
        limit = self._plan_time_limit_s
        if time_limit_s is not None:
            limit = max(0.05, min(limit, DEADLINE_SHARE * time_limit_s))
        outcome = plan_fleet(fleet_request, 0, prior if prior.gpus else None, self._solver,
                             limit)
        with self._plan_changed:
            if still_wanted is not None and not still_wanted():
                raise CallerGone("the fleet plan was computed but not stored")
            plan = replace(outcome.plan, revision=self._plan.revision + 1)
            if self._journal is not None:
                self._journal.planned(plan)
            self._plan = plan
            self._plan_changed.notify_all()
        return convert.fleet_plan_to_pb(plan)

    def get_plan(self) -> pb.FleetPlan:
        with self._lock:
            return convert.fleet_plan_to_pb(self._plan)

    def wait_for_plan(self, after_revision: int, timeout_s: float | None = None
                      ) -> pb.FleetPlan | None:
        """The current plan once its revision is > ``after_revision``; None on timeout."""
        with self._plan_changed:
            ready = self._plan_changed.wait_for(lambda: self._plan.revision > after_revision,
                                                timeout=timeout_s)
            return convert.fleet_plan_to_pb(self._plan) if ready else None

    @property
    def plan_revision(self) -> int:
        with self._lock:
            return self._plan.revision

    def counts(self) -> tuple[int, int, int]:
        """(workloads bound, GPUs in the inventory, fleet plan revision), read together."""
        with self._lock:
            cluster = self._placer.cluster
            return (len(cluster.bindings) + len(self._restored), cluster.gpu_count,
                    self._plan.revision)
