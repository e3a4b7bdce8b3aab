"""Thin gRPC servicer: proto in, engine call, proto out; domain errors -> status codes. The
caller's tenant scope (``scheduler.callers.caller_scope``) is checked here for Place (its tenant,
and its model's tenant where the models table lists the model), the fleet-wide calls and
ListBindings, and passed to the engine, which checks it under its lock where
it releases, renews or ranks a binding (``scheduler.tenancy``'s decisions)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any, TypeVar

import grpc

from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler import convert, tenancy
from scheduler.callers import caller_of, caller_scope, caller_shares
from scheduler.domain.errors import (
    AlreadyExists,
    CallerGone,
    Infeasible,
    InvalidArgument,
    NotReady,
    Unavailable,
)
from scheduler.engine import PlacementEngine
from scheduler.metrics import PlacementMetrics
from scheduler.stream_shares import POOL_FULL, StreamSlots, caller_cap
from scheduler.tenancy import PermissionDenied

T = TypeVar("T")
log = logging.getLogger(__name__)

#: How often a WatchPlan stream re-checks that its client and the server are still there.
WATCH_POLL_S = 0.5
#: A WatchPlan call that ends this close to its server-side deadline ended by its deadline.
DEADLINE_SLACK_S = 1.0
_EMPTY_PLACE = pb.PlaceResponse()
#: Trailing metadata of a Place refused ALREADY_EXISTS: the Binding held under its id,
#: serialized (the proto's PlaceResponse is not sent with an error status).
BINDING_TRAILER = "headroom-binding-bin"
#: A binding larger than this (ids or node names of thousands of characters) is not sent: the
#: trailer travels base64-encoded beside the details, within the client's 16 KiB of headers.
MAX_TRAILER_BYTES = 6 * 1024
#: Status details travel as a header, percent-encoded (up to 3 bytes per UTF-8 byte), and a
#: client drops a call whose headers pass 16 KiB (RESOURCE_EXHAUSTED "Stream removed"): details
#: echoing a long client value (an id, a node or product name) are cut to this many UTF-8 bytes.
MAX_DETAILS_BYTES = 1024


def bounded_details(details: str) -> str:
    """``details`` cut to MAX_DETAILS_BYTES (UTF-8) when longer: its head, which names the
    field or reason, and its tail, joined by an ellipsis."""
    if len(details) <= MAX_DETAILS_BYTES // 4:  # at most 4 bytes per character
        return details
    raw = details.encode()
    if len(raw) <= MAX_DETAILS_BYTES:
        return details
    tail = MAX_DETAILS_BYTES // 4
    head = MAX_DETAILS_BYTES - tail - len("…".encode())
    return (raw[:head].decode(errors="ignore") + "…"
            + raw[-tail:].decode(errors="ignore"))


def call_engine(context: grpc.ServicerContext, fn: Callable[[], T], empty: T,
                metrics: PlacementMetrics | None = None, method: str = "") -> T:
    """Run ``fn`` and translate domain errors into gRPC status codes.

    The status is set on the context and ``empty`` is returned (gRPC then sends the status
    without the message); this is cheaper than ``context.abort``, which raises. With
    ``metrics``, the call is counted under ``method`` with its code and engine time.
    """
    started = time.perf_counter()
    reason = None
    try:
        result = fn()
        if metrics is not None:
            metrics.observe(method, "OK", time.perf_counter() - started)
        return result
    except InvalidArgument as exc:
        code, details = grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    except AlreadyExists as exc:
        code, details = grpc.StatusCode.ALREADY_EXISTS, str(exc)
    except Infeasible as exc:
        code, details, reason = grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc), exc.reason
    except NotReady as exc:
        code, details, reason = grpc.StatusCode.FAILED_PRECONDITION, str(exc), exc.reason
    except CallerGone as exc:
        code, details = grpc.StatusCode.CANCELLED, str(exc)
    except Unavailable as exc:
        code, details = grpc.StatusCode.UNAVAILABLE, str(exc)
    except PermissionDenied as exc:
        code, details = grpc.StatusCode.PERMISSION_DENIED, str(exc)
        log.warning("placement API denied %s: %s", method or "a call", bounded_details(details))
    except Exception:  # a bug: gRPC answers UNKNOWN; counted as such, so error ratios see it
        if metrics is not None:
            metrics.observe(method, grpc.StatusCode.UNKNOWN.name, time.perf_counter() - started)
        raise
    if metrics is not None:
        metrics.observe(method, code.name, time.perf_counter() - started, reason)
    context.set_code(code)
    context.set_details(bounded_details(details))
    return empty


#: The short, hot calls. They run on their own small thread pool: on a 2-core machine a few
#: threads contending for the GIL serve Place/Release pairs much faster than many.
FAST_METHODS = ("SyncInventory", "Place", "Release", "GetPlan", "RenewLeases", "RankReplicas")


def _send_existing(context: grpc.ServicerContext, scope: tenancy.Scope,
                   exc: AlreadyExists) -> None:
    """An ALREADY_EXISTS Place's binding, held under its id, in the trailing metadata
    BINDING_TRAILER (a caller whose Place timed out retries and learns where it bound); left
    out for a caller whose scope may not see that binding's tenant, and when too large."""
    held = exc.binding
    if held is None or not tenancy.may_act_for(scope, held.tenant):
        return
    blob = convert.binding_to_pb(held).SerializeToString()
    if len(blob) <= MAX_TRAILER_BYTES:
        context.set_trailing_metadata(((BINDING_TRAILER, blob),))


def _before_deadline(context: grpc.ServicerContext) -> Callable[[], bool] | None:
    """Whether the call's deadline has not passed (None: no deadline), read from the clock:
    ``context.is_active`` under the engine lock cost ~5 % of Place/Release pairs under load."""
    remaining_s = context.time_remaining()
    if remaining_s is None:
        return None
    deadline_s = time.monotonic() + remaining_s
    return lambda: time.monotonic() < deadline_s


class PlacementServicer(pb_grpc.PlacementServicer):
    """The Placement service of DESIGN.md over a PlacementEngine.

    With ``fast_pool`` the methods of FAST_METHODS run on that thread pool (gRPC's per-method
    ``experimental_thread_pool`` hook); PlanFleet, WatchPlan streams and any other service on
    the server use the server's default pool, so long calls never hold up Place.
    """

    def __init__(self, engine: PlacementEngine,
                 fast_pool: futures.ThreadPoolExecutor | None = None,
                 metrics: PlacementMetrics | None = None,
                 max_watch_streams: int | None = None,
                 watch_caller_share: float | None = None) -> None:
        self.engine = engine
        self.metrics = metrics
        self.stopping = threading.Event()
        #: WatchPlan streams served at once (None: no cap); each holds a thread of the pool
        self.max_watch_streams = max_watch_streams
        #: the share of them one caller may hold (None: no per-caller cap)
        self.watch_caller_share = watch_caller_share
        per_caller = (None if watch_caller_share is None or max_watch_streams is None
                      else caller_cap(max_watch_streams, watch_caller_share))
        self._watch_streams = StreamSlots(max_watch_streams, per_caller)
        if fast_pool is not None:
            for name in FAST_METHODS:
                setattr(self, name, _on_pool(getattr(self, name), fast_pool))

    def SyncInventory(self, request: pb.SyncInventoryRequest,
                      context: grpc.ServicerContext) -> pb.SyncInventoryResponse:
        scope = caller_scope()

        def sync() -> pb.SyncInventoryResponse:
            tenancy.check_fleet_wide(scope, "SyncInventory")
            return self.engine.sync_inventory(request)

        return call_engine(context, sync, pb.SyncInventoryResponse(), self.metrics,
                           "SyncInventory")

    def Place(self, request: pb.PlaceRequest, context: grpc.ServicerContext) -> pb.PlaceResponse:
        scope = caller_scope()
        still_wanted = _before_deadline(context)

        def place() -> pb.PlaceResponse:
            # a malformed request is INVALID_ARGUMENT before the store is asked for its model
            spec = convert.workload_from_pb(request)
            tenancy.check_place(scope, spec.tenant)
            tenancy.check_model(scope, spec.tenant, spec.model,
                                self.engine.listed_tenant(spec.model))
            try:
                return self.engine.place(spec, still_wanted=still_wanted)
            except AlreadyExists as exc:
                _send_existing(context, scope, exc)
                raise

        return call_engine(context, place, _EMPTY_PLACE, self.metrics, "Place")

    def Release(self, request: pb.ReleaseRequest,
                context: grpc.ServicerContext) -> pb.ReleaseResponse:
        scope = caller_scope()
        return call_engine(context, lambda: self.engine.release(request, scope),
                           pb.ReleaseResponse(), self.metrics, "Release")

    def RenewLeases(self, request: pb.RenewLeasesRequest,
                    context: grpc.ServicerContext) -> pb.RenewLeasesResponse:
        scope = caller_scope()
        return call_engine(context, lambda: self.engine.renew_leases(request, scope),
                           pb.RenewLeasesResponse(), self.metrics, "RenewLeases")

    def RankReplicas(self, request: pb.RankReplicasRequest,
                     context: grpc.ServicerContext) -> pb.RankReplicasResponse:
        scope = caller_scope()
        return call_engine(context, lambda: self.engine.rank_replicas(request, scope),
                           pb.RankReplicasResponse(), self.metrics, "RankReplicas")

    def PlanFleet(self, request: pb.PlanFleetRequest,
                  context: grpc.ServicerContext) -> pb.FleetPlan:
        scope = caller_scope()
        remaining_s = context.time_remaining()

        def plan() -> pb.FleetPlan:
            tenancy.check_fleet_wide(scope, "PlanFleet")
            return self.engine.plan_fleet(request, time_limit_s=remaining_s,
                                          still_wanted=context.is_active)

        return call_engine(context, plan, pb.FleetPlan(), self.metrics, "PlanFleet")

    def GetPlan(self, request: pb.GetPlanRequest, context: grpc.ServicerContext) -> pb.FleetPlan:
        return call_engine(context, self.engine.get_plan, pb.FleetPlan(), self.metrics,
                           "GetPlan")

    def ListBindings(self, request: pb.ListBindingsRequest,
                     context: grpc.ServicerContext) -> pb.ListBindingsResponse:
        scope = caller_scope()

        def listed() -> pb.ListBindingsResponse:
            reply = self.engine.list_bindings(request)
            if scope is None:
                return reply
            return pb.ListBindingsResponse(bindings=tenancy.visible(scope, reply.bindings))

        return call_engine(context, listed, pb.ListBindingsResponse(), self.metrics,
                           "ListBindings")

    def WatchPlan(self, request: pb.WatchPlanRequest,
                  context: grpc.ServicerContext) -> Iterator[pb.FleetPlan]:
        """Stream every plan whose revision is above the last one sent, until cancelled. A
        client that has seen a revision this server has not made (the server restarted with its
        plans in memory only) is sent the current plan first, not left waiting for revisions
        to catch up."""
        after = request.after_revision
        if after < 0:
            context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
            context.set_details(f"after_revision: must be >= 0, got {after}")
            self._count_stream("INVALID_ARGUMENT")
            return
        caller = caller_of(context)
        if not self._take_watch_stream(context, caller, caller_shares(context)):
            self._count_stream("RESOURCE_EXHAUSTED")
            return
        call_ended = threading.Event()

        def end_call() -> None:
            call_ended.set()
            self.engine.wake_plan_waiters()

        def ended() -> bool:
            return call_ended.is_set() or self.stopping.is_set()

        failed = False
        try:  # counted until this thread leaves: a cancelled stream frees its thread at once
            if not context.add_callback(end_call):  # the call has already ended
                return
            if after > self.engine.plan_revision:
                after = 0
            while not ended() and context.is_active():
                plan = self.engine.wait_for_plan(after, timeout_s=WATCH_POLL_S, ended=ended)
                if plan is None:
                    continue
                after = plan.revision
                yield plan
        except Exception:
            failed = True
            raise
        finally:
            self._watch_streams.drop(caller)
            self._count_stream("UNKNOWN" if failed else _stream_end_code(context, call_ended))

    def _count_stream(self, code: str) -> None:
        """A WatchPlan call counted by its final code: refused before its stream opened, or its
        stream ended (no engine time: an open stream waits for plans as long as its client
        stays, and is not)."""
        if self.metrics is not None:
            self.metrics.requests.labels("WatchPlan", code).inc()

    def _take_watch_stream(self, context: grpc.ServicerContext, caller: str,
                           shared: bool) -> bool:
        """Count this stream of ``caller`` (dropped when its thread leaves the stream); False
        (RESOURCE_EXHAUSTED set, with the reason) when ``max_watch_streams`` are already open,
        so that streams never take the threads PlanFleet, ListBindings and health checks
        need, or when the caller holds its share of them, so that one caller (a tenant's
        token) cannot lock the others (the operator) out."""
        full = self._watch_streams.take(caller, shared)
        if full is None:
            return True
        cap = self.max_watch_streams
        context.set_code(grpc.StatusCode.RESOURCE_EXHAUSTED)
        if full == POOL_FULL:
            context.set_details(f"watch_streams_full: all {cap} WatchPlan streams of this "
                                "server are open; retry later or poll GetPlan")
        else:
            context.set_details(bounded_details(
                f"watch_streams_per_caller: {caller} already holds "
                f"{self._watch_streams.per_caller} WatchPlan streams, the most one caller may "
                f"hold (placement.watch_caller_share {self.watch_caller_share:g} of this "
                f"server's {cap}), so that no caller takes them all; close one of its "
                "streams (one stream sees every plan) or poll GetPlan"))
        return False

    def open_watch_streams(self) -> int:
        return self._watch_streams.open()


def _stream_end_code(context: grpc.ServicerContext, call_ended: threading.Event) -> str:
    """How a WatchPlan stream that raised nothing ended: DEADLINE_EXCEEDED or CANCELLED when
    its client's call ended first (its deadline passed, or it cancelled or went away), else OK
    (the server stopping ends it cleanly). The client's deadline passes first: the server's
    runs from when the request arrived, so a client whose deadline passed cancels the call
    while the server's still has the request's transit time left (on a loaded machine, tenths
    of a second); a call that ends within ``DEADLINE_SLACK_S`` of its deadline counts as its
    deadline's."""
    if not (call_ended.is_set() or not context.is_active()):
        return "OK"
    remaining_s = context.time_remaining()
    deadline = remaining_s is not None and remaining_s <= DEADLINE_SLACK_S
    return "DEADLINE_EXCEEDED" if deadline else "CANCELLED"


def _on_pool(method: Callable[..., Any], pool: futures.ThreadPoolExecutor) -> Callable[..., Any]:
    """``method`` as a plain function carrying gRPC's per-method thread-pool attribute."""

    def handler(request: Any, context: grpc.ServicerContext) -> Any:
        return method(request, context)

    handler.experimental_thread_pool = pool  # type: ignore[attr-defined]
    handler.__name__ = getattr(method, "__name__", "handler")
    return handler
