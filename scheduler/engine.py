"""PlacementEngine: thread-safe placement state behind the gRPC API, in memory or following a
journal (``scheduler.journal``) that it shares with other engines and outlives it.

Methods take and return the generated proto messages so the control plane can call the engine
in-process with the same messages the gRPC API uses. Errors are the typed domain exceptions of
``scheduler.domain.errors``; nothing is half-applied when one is raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from protos.headroom.v1 import placement_pb2 as pb
from scheduler import convert
from scheduler.domain.errors import AlreadyExists, CallerGone, Infeasible, NotReady
from scheduler.domain.fleet import plan_fleet
from scheduler.domain.fleet_prior import prior_from_inventory
from scheduler.domain.model import Binding, WorkloadSpec
from scheduler.domain.routing import rank_replicas
from scheduler.domain.validate import (
    validate_fleet_request,
    validate_listing,
    validate_nodes,
    validate_workload_id,
)
from scheduler.engine_state import EngineState
from scheduler.tenancy import Scope, check_release

#: Share of the caller's remaining deadline the fleet solver may use.
DEADLINE_SHARE = 0.8
#: ``no_inventory``'s detail once a SyncInventory succeeded: "SyncInventory first" would send
#: a caller that just synced an empty fleet looking for a call it already made.
SYNCED_EMPTY = "the last SyncInventory listed no node"
log = logging.getLogger("headroom.placement")


class PlacementEngine(EngineState):
    """Inventory, bindings (``scheduler.held_bindings``) and the current fleet plan (with its
    revision), under one lock.

    With a ``journal`` the engine starts from what it holds and runs every change through it
    (``scheduler.journal``): bindings on nodes this engine's inventory does not have (yet: all
    of them before the first inventory after a start) wait, counted, found, released and never
    bound twice, until an inventory has their node or releases them; plan revisions continue.

    A binding placed with a ``lease_s`` expires once ``now_s()`` (Unix seconds) passes its
    lease unless RenewLeases extended it: every call that changes bindings (and ListBindings,
    and ``expire_leases``) first releases the expired ones, through the journal when there is one.
    """

    # ---------------------------------------------------------------- online placement
    def listed_tenant(self, model: str) -> str | None:
        """The tenant the store's models table lists ``model`` under, read now (None: no
        model, a model it does not list, or an engine beside no models table), for the
        tenancy checks of Place (``scheduler.tenancy.check_model``); raises Unavailable when
        the table cannot be read."""
        if not model or self._model_tenant is None:
            return None
        return self._model_tenant(model)

    def sync_inventory(self, request: pb.SyncInventoryRequest) -> pb.SyncInventoryResponse:
        """Replace the inventory with a full snapshot (idempotent). A binding whose node and
        GPU indices are in it and whose GPUs still meet its request (allowed product, stated
        memory, MIG profile) is kept, even on a node it now overcommits (its pod still runs:
        its GPUs stay taken, nothing new lands there beyond what is free); every other one is
        released (through the journal when there is one), logged and listed in the response
        with why. The response also names the overcommitted nodes."""
        nodes = convert.nodes_from_pb(request)
        validate_nodes(nodes)
        with self._lock:
            self._expire(self._now_s())
            held = self._held
            if self._journal is None:
                held.placer, released = held.placer.resynced(nodes)
            else:
                with self._journaled() as change:
                    fresh, released = held.placer.resynced(nodes, tuple(held.waiting.values()))
                    if released:
                        change.released([r.binding.workload_id for r in released])
                held.placer, held.waiting = fresh, {}
            self._synced = True
            cluster = held.placer.cluster
            over = cluster.overcommitted()
        if released:
            log.warning("placement.inventory_released_bindings", extra={
                "workload_ids": [r.binding.workload_id for r in released],
                "released": [{"workload_id": r.binding.workload_id, "node": r.binding.node,
                              "reason": r.reason, "detail": r.detail} for r in released]})
        return pb.SyncInventoryResponse(
            nodes=len(nodes), gpus=cluster.gpu_count, overcommitted_nodes=over,
            released=[pb.ReleasedBinding(workload_id=r.binding.workload_id, node=r.binding.node,
                                         reason=r.reason, detail=r.detail) for r in released])

    def place(self, request: pb.PlaceRequest | WorkloadSpec,
              still_wanted: Callable[[], bool] | None = None) -> pb.PlaceResponse:
        """Bind one workload (a PlaceRequest, or the WorkloadSpec ``convert.workload_from_pb``
        made of one); raises InvalidArgument, AlreadyExists or Infeasible, and NotReady
        (``no_inventory``) when no SyncInventory succeeded since this engine started: knowing
        no node is not a full fleet (a synced inventory without nodes is Infeasible
        ``no_inventory``, saying the last SyncInventory listed no node). When ``still_wanted``
        returns False once the engine is free to bind (the caller's deadline passed while the
        call waited), or, with a journal, once the binding is written and about to commit (the
        wait for the journal's lock and its writes outlasted the deadline), nothing is bound and
        CallerGone is raised, so a retry of the same id is placed instead of refused as
        ALREADY_EXISTS. The commit itself can still outlast the deadline: a caller that timed out
        must reconcile (README). AlreadyExists carries the binding held under the id."""
        spec = (request if isinstance(request, WorkloadSpec)
                else convert.workload_from_pb(request))
        with self._lock:
            self._check_wanted(spec, still_wanted)
            now_s = self._now_s()
            self._expire(now_s)
            try:
                if self._journal is None:
                    binding = self._held.leased(self._held.placer.place(spec), spec.lease_s,
                                                now_s)
                else:
                    binding = self._place_journaled(spec, now_s, still_wanted)
            except Infeasible as exc:
                if exc.reason != "no_inventory":
                    raise
                if not self._synced:
                    raise NotReady(exc.reason, exc.detail) from None
                raise Infeasible(exc.reason, SYNCED_EMPTY) from None
            except AlreadyExists as exc:
                exc.binding = self._held.get(spec.workload_id)
                raise
        return pb.PlaceResponse(binding=convert.binding_to_pb(binding))

    @staticmethod
    def _check_wanted(spec: WorkloadSpec, still_wanted: Callable[[], bool] | None) -> None:
        if still_wanted is not None and not still_wanted():
            raise CallerGone(f"workload_id {spec.workload_id!r}: the caller was gone before "
                             "it was bound; nothing was bound")

    def _place_journaled(self, spec: WorkloadSpec, now_s: float,
                         still_wanted: Callable[[], bool] | None = None) -> Binding:
        """Place inside one journal change (caller holds the lock). A leased binding that this
        engine learns of only there (bound elsewhere since its last read) and finds run out is
        released in that change first, so its id and GPUs can be bound again at once; when the
        change does not commit, the engine keeps it, as the store does. ``still_wanted`` is
        asked last before the commit: False rolls the change back (CallerGone)."""
        held, placed = self._held, False
        gone: list[Binding] = []
        try:
            with self._journaled() as change:
                gone = held.expired(now_s) if now_s >= held.lease_check_at_s else []
                if gone:
                    change.released([b.workload_id for b in gone])
                    held.forget([b.workload_id for b in gone])
                if spec.workload_id in held.waiting:
                    raise AlreadyExists(spec.workload_id)
                binding = held.placer.place(spec)
                placed = True
                binding = held.leased(binding, spec.lease_s, now_s)
                change.bound(binding)
                self._check_wanted(spec, still_wanted)  # gone: the change rolls back
        except BaseException:
            if placed:
                held.placer.release(spec.workload_id)
            for kept in gone:
                held.keep(kept)
                held.watch_lease(kept)
            raise
        self._report([b.workload_id for b in gone])
        return binding

    def release(self, request: pb.ReleaseRequest, scope: Scope = None) -> pb.ReleaseResponse:
        """Free a workload's resources; unknown ids are fine (idempotent). A caller scoped to
        tenants (``scope``) may free only their bindings: PermissionDenied, checked against the
        binding held when it is freed (with a journal: after catching up with it)."""
        workload_id = request.workload_id
        validate_workload_id("workload_id", workload_id)
        with self._lock:
            if self._journal is not None:
                with self._journaled() as change:
                    held = self._held.get(workload_id)
                    check_release(scope, workload_id, held.tenant if held else None)
                    if held is not None:
                        change.released([workload_id])
            else:
                held = self._held.get(workload_id)
                check_release(scope, workload_id, held.tenant if held else None)
            self._held.release(workload_id)
        return pb.ReleaseResponse()

    def binding(self, workload_id: str) -> pb.Binding | None:
        """The current binding of a workload, or None."""
        with self._lock:
            found = self._held.get(workload_id)
        if found is None or found.expired(self._now_s()):
            return None
        return convert.binding_to_pb(found)

    def list_bindings(self, request: pb.ListBindingsRequest) -> pb.ListBindingsResponse:
        """The bindings held now (after catching up with the journal), on ``request.node``, with
        ids starting with ``request.workload_prefix`` and of ``request.model`` when given (all
        of them), by workload id; raises InvalidArgument for a malformed filter, Unavailable
        when the journal cannot be read."""
        validate_listing(request.node, request.workload_prefix, request.model)
        self.refresh()
        with self._lock:
            self._expire(self._now_s())
            held = self._held.all()
        chosen = sorted((b for b in held if (not request.node or b.node == request.node)
                         and (not request.model or b.model == request.model)
                         and b.workload_id.startswith(request.workload_prefix)),
                        key=lambda b: b.workload_id)
        return pb.ListBindingsResponse(bindings=[convert.binding_to_pb(b) for b in chosen])

    def rank_replicas(self, request: pb.RankReplicasRequest,
                      scope: Scope = None) -> pb.RankReplicasResponse:
        """The routing hint (``scheduler.domain.routing``) over the bindings held now, after
        catching up with the journal; to a caller scoped to tenants (``scope``) another
        tenant's ids are unknown. Raises InvalidArgument, Unavailable."""
        loads, mismatch_factor = convert.replica_loads_from_pb(request)
        self.refresh()
        with self._lock:
            self._expire(self._now_s())
            sites = self._held.placer.cluster.replica_sites([x.workload_id for x in loads],
                                                             self._held.waiting)
            sites = [site if site is None or self._held.may_act_on(scope, load.workload_id)
                     else None for load, site in zip(loads, sites, strict=True)]
        pairs = list(zip(loads, sites, strict=True))
        ranked = rank_replicas([(x, s) for x, s in pairs if s is not None],
                               request.model_version, mismatch_factor)
        return convert.ranking_to_pb(ranked, [x.workload_id for x, s in pairs if s is None])

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
                prior = prior_from_inventory(self._held.placer.cluster.nodes)
        limit = self._plan_time_limit_s
        if time_limit_s is not None:
            limit = max(0.05, min(limit, DEADLINE_SHARE * time_limit_s))
        outcome = plan_fleet(fleet_request, 0, prior if prior.gpus else None, self._solver,
                             limit)
        with self._plan_changed:
            if still_wanted is not None and not still_wanted():
                raise CallerGone("the fleet plan was computed but not stored")
            if self._journal is None:
                plan = replace(outcome.plan, revision=self._plan.revision + 1)
            else:
                with self._journaled() as change:  # another engine's plan counts as previous
                    plan = replace(outcome.plan, revision=self._plan.revision + 1)
                    change.planned(plan)
            self._plan = plan
            self._plan_changed.notify_all()
        return convert.fleet_plan_to_pb(plan)

    def get_plan(self) -> pb.FleetPlan:
        with self._lock:
            return convert.fleet_plan_to_pb(self._plan)

    def wait_for_plan(self, after_revision: int, timeout_s: float | None = None,
                      ended: Callable[[], bool] | None = None) -> pb.FleetPlan | None:
        """The current plan once its revision is > ``after_revision``; None on timeout, or
        as soon as ``ended`` returns True after ``wake_plan_waiters`` (the waiter's call ended)."""
        def newer() -> bool:
            return self._plan.revision > after_revision

        with self._plan_changed:
            self._plan_changed.wait_for(
                newer if ended is None else lambda: newer() or ended(), timeout=timeout_s)
            return convert.fleet_plan_to_pb(self._plan) if newer() else None

    def wake_plan_waiters(self) -> None:
        """Wake every ``wait_for_plan`` to check its ``ended`` (e.g. a WatchPlan call ended),
        so that its thread goes back to the pool now, not at its timeout."""
        with self._plan_changed:
            self._plan_changed.notify_all()

    @property
    def plan_revision(self) -> int:
        with self._lock:
            return self._plan.revision

    def counts(self) -> tuple[int, int, int]:
        """(workloads bound, GPUs in the inventory, fleet plan revision), read together; a
        binding whose lease ran out is not bound, swept or not (e.g. one that ran out while no
        server ran, counted by a restarted server before its first sweep)."""
        with self._lock:
            bound = self._held.bound_count(self._now_s())
            return bound, self._held.placer.cluster.gpu_count, self._plan.revision
