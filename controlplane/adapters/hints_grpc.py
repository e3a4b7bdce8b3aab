"""The DemandHints gRPC service (``protos/headroom/v1/hints.proto``): serving layers and
gateways announce demand ahead, as ``headroom hint`` does from a terminal, into the same store
table the reconcile tick reads. A refused hint is INVALID_ARGUMENT naming the proto field and
stores nothing; an unknown id is NOT_FOUND; a store that fails UNAVAILABLE, naming what could not
be done. AddHint is idempotent: a request equal to a stored hint not yet ended returns that hint
(``SqlDemandHints.add_hint``), so a retry after a lost reply adds nothing.

A caller scoped to tenants (a token or client certificate, ``scheduler.tenancy``) announces,
lists and withdraws the hints of its tenants' models only (the models table names each model's
tenant, read per call): a hint for another tenant's model is PERMISSION_DENIED naming the model,
another tenant's hint is not listed, and withdrawing it is NOT_FOUND as for an unknown id. A hint
moves its model's capacity within its tenant's GPU budget (``autoscaling.tenant_gpu_budgets``).

A hint over what the server's known capacity can ever hold for its model (its settings' node
pools at max_nodes and GPU budgets: ``controlplane.autoscaling.hint_capacity``) is stored all the
same (it is true demand; the loop scales as far as it can) and AddHint's reply says so in
``capacity_warning``, beside ``capacity_rps``; a server that knows no pools leaves both unset.
The capacity is counted on the per-replica rate the loop sizes with (the profile the last tick
corrected, when the settings correct profiles). A hint on a paused model is stored too, and the
reply's ``pause_warning`` says the pause holds the model until it is resumed
(``controlplane.hint_checks``, as ``headroom hint add`` says it).

Every reply's hint says in ``model_listed`` whether the models table lists its model (read per
call): a hint kept by ``headroom models remove --keep-hints`` is listed with it false, as
``headroom hint list`` marks it "model not listed"."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import NoReturn, Protocol, TypeVar

import grpc

from controlplane.autoscaling.hint_capacity import HintCheck
from controlplane.domain.errors import error_line
from controlplane.domain.hints import DemandHint, HintError, new_hint
from controlplane.domain.store_clock import StoreNow
from protos.headroom.v1 import hints_pb2 as pb
from protos.headroom.v1 import hints_pb2_grpc as pb_grpc
from scheduler.callers import caller_scope
from scheduler.domain.names import MAX_MODEL_CHARS, name_problem
from scheduler.service import bounded_details

#: the proto field each HintError field is about
_FIELD = {"model": "model", "rate_rps": "rate_rps", "end": "end_unix_s",
          "window": "start_unix_s/end_unix_s", "reason": "reason"}
log = logging.getLogger("headroom.hints")
MAX_UNIX_S = 253402300799.0  # 9999-12-31T23:59:59Z
T = TypeVar("T")


class HintStore(Protocol):
    def add_hint(self, hint: DemandHint, now: datetime,
                 starts_now: bool = False) -> DemandHint: ...

    def hints(self, ending_after_at: datetime | None = None) -> tuple[DemandHint, ...]: ...

    def remove_hint(self, hint_id: int) -> DemandHint | None: ...


def to_pb(hint: DemandHint) -> pb.DemandHint:
    return pb.DemandHint(id=hint.hint_id or 0, model=hint.model, rate_rps=hint.rate_rps,
                         start_unix_s=hint.start_at.timestamp(),
                         end_unix_s=hint.end_at.timestamp(), reason=hint.reason)


def _listed(hint: DemandHint, tenants: Mapping[str, str]) -> pb.DemandHint:
    """``hint`` in the proto, ``model_listed`` from the models table (``tenants``): a model
    removed with ``models remove --keep-hints`` is not listed, and its hints floor nothing."""
    message = to_pb(hint)
    message.model_listed = hint.model in tenants
    return message


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, bounded_details(message))
    raise AssertionError("context.abort returned")  # it raises


def _stored(context: grpc.ServicerContext, what: str, fn: Callable[[], T]) -> T:
    """``fn`` (a store read or write); a store that fails (down, unreachable) is UNAVAILABLE in
    one line, not UNKNOWN with the SQL statement and a traceback in the server's log."""
    try:
        return fn()
    except Exception as error:
        _abort(context, grpc.StatusCode.UNAVAILABLE, f"store: cannot {what}: {error_line(error)}")


def _at(context: grpc.ServicerContext, field: str, unix_s: float) -> datetime:
    if not 0 <= unix_s <= MAX_UNIX_S:  # also NaN
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT,
               f"{field}: {unix_s} is not a time in seconds since 1970")
    return datetime.fromtimestamp(unix_s, UTC)


def _in_scope(model: str, tenants: Mapping[str, str]) -> bool:
    """Whether the caller may see and change ``model``'s hints: unscoped, or scoped to the
    tenant the models table names for it (a model no longer listed: unscoped callers only)."""
    scope = caller_scope()
    return scope is None or tenants.get(model) in scope


class DemandHintsServicer(pb_grpc.DemandHintsServicer):
    def __init__(self, store: HintStore, model_tenants: Callable[[], Mapping[str, str]],
                 now: Callable[[], StoreNow],
                 check: Callable[[DemandHint], HintCheck] | None = None) -> None:
        self.store = store
        self.model_tenants = model_tenants  # the store's models and their tenants, per call
        self.now = now  # by the clock the store's loop runs on (start 0, an end already past)
        self.check = check  # what is said of a hint (capacity, pause); None: nothing

    def AddHint(self, request: pb.AddHintRequest,
                context: grpc.ServicerContext) -> pb.DemandHint:
        now = _stored(context, "read the store's clock", self.now)
        start_at = (_at(context, "start_unix_s", request.start_unix_s)
                    if request.start_unix_s else now.at)
        if not request.end_unix_s:  # proto3's omitted double: no end given, not 1970
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                   "end_unix_s: required (seconds since 1970 when the hint ends; 0 is the "
                   "field omitted)")
        end_at = _at(context, "end_unix_s", request.end_unix_s)
        tenants = _stored(context, "read the models", self.model_tenants)
        try:
            hint = new_hint(request.model, request.rate_rps, start_at, end_at, request.reason,
                            set(tenants), now, [m for m in tenants if _in_scope(m, tenants)])
        except HintError as error:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{_FIELD[error.field]}: {error}")
        if not _in_scope(hint.model, tenants):
            scope = ", ".join(sorted(caller_scope() or ())) or "none"
            _abort(context, grpc.StatusCode.PERMISSION_DENIED,
                   f"model: {hint.model} is not a model of the caller's tenants ({scope})")
        check = self.check
        found = HintCheck() if check is None else _stored(
            context, "read the model's profile and pause", lambda: check(hint))
        added = _listed(_stored(context, "add the demand hint",
                                lambda: self.store.add_hint(
                                    hint, now.at, starts_now=not request.start_unix_s)), tenants)
        capacity = found.capacity
        if capacity is not None:
            added.capacity_rps = capacity.capacity_rps
            added.capacity_warning = capacity.warning()
            if added.capacity_warning:
                log.warning("hint.over_capacity", extra={
                    "hint_id": added.id, "model": hint.model, "error": added.capacity_warning})
        if found.pause is not None:
            added.pause_warning = found.pause.hint_warning()
            log.warning("hint.model_paused", extra={
                "hint_id": added.id, "model": hint.model, "error": added.pause_warning})
        return added

    def ListHints(self, request: pb.ListHintsRequest,
                  context: grpc.ServicerContext) -> pb.ListHintsResponse:
        problem = name_problem(request.model, MAX_MODEL_CHARS)
        if problem is not None:  # as AddHint's model
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"model: {problem}")
        ending_after_at = None if request.include_ended else _stored(
            context, "read the store's clock", self.now).at
        hints = _stored(context, "read the demand hints", lambda: self.store.hints(ending_after_at))
        tenants = _stored(context, "read the models", self.model_tenants)
        return pb.ListHintsResponse(hints=[
            _listed(h, tenants) for h in hints
            if (not request.model or h.model == request.model) and _in_scope(h.model, tenants)])

    def RemoveHint(self, request: pb.RemoveHintRequest,
                   context: grpc.ServicerContext) -> pb.DemandHint:
        tenants = _stored(context, "read the models", self.model_tenants)
        if caller_scope() is not None:  # another tenant's hint is answered as an unknown id
            listed = _stored(context, "read the demand hints", lambda: self.store.hints(None))
            if not any(h.hint_id == request.id and _in_scope(h.model, tenants) for h in listed):
                _abort(context, grpc.StatusCode.NOT_FOUND,
                       f"id: no demand hint with id {request.id}")
        removed = _stored(context, "remove the demand hint",
                          lambda: self.store.remove_hint(request.id))
        if removed is None:
            _abort(context, grpc.StatusCode.NOT_FOUND, f"id: no demand hint with id {request.id}")
        return _listed(removed, tenants)


def hints_registrar(servicer: DemandHintsServicer) -> Callable[[grpc.Server], str]:
    """For ``scheduler.server.create_server(..., extra_servicers=[hints_registrar(s)])``."""
    def register(server: grpc.Server) -> str:
        pb_grpc.add_DemandHintsServicer_to_server(servicer, server)
        return str(pb.DESCRIPTOR.services_by_name["DemandHints"].full_name)
    return register
