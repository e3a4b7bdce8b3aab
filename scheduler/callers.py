"""Who is calling the placement API: the interceptor that authenticates each call with the
bearer tokens and client certificate identities of ``scheduler.security`` and runs it with its
caller's tenant scope as ``caller_scope()``, which the servicer and engine enforce
(``scheduler.tenancy``), and ``caller_of(context)``, the name a stream pool counts a caller by
(``scheduler.stream_shares``)."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import grpc

from scheduler.client_identities import peer_identities
from scheduler.security import BearerTokens, ClientIdentities, TransportSecurity, read_credentials
from scheduler.stream_shares import caller_name, token_name
from scheduler.tenancy import Scope, intersection

log = logging.getLogger(__name__)

#: Services answered without a token (each only reads): health (kubelet's probe carries no
#: metadata) and KEDA's external scaler (KEDA sends none; mutual TLS authenticates it).
TOKEN_EXEMPT_SERVICES = frozenset({"grpc.health.v1.Health", "externalscaler.ExternalScaler"})
#: Token-exempt services that, with a client identities file, still need a client certificate
#: whose identity is listed, unscoped, as every other call needs a listed one: KEDA's scaler
#: answers for every tenant's models (their forecast demand).
UNSCOPED_CERTIFICATE_SERVICES = frozenset({"externalscaler.ExternalScaler"})
#: The scope of the token and/or client certificate that authorized the call being handled
#: (None: unscoped, also without a token or identities file); set by ``CallerInterceptor`` in
#: the thread and context the handler runs in.
_CALLER_SCOPE: contextvars.ContextVar[Scope] = contextvars.ContextVar("placement_caller_scope",
                                                                      default=None)
#: The name (``stream_shares.token_name``) of the bearer token that authorized the streaming
#: call being handled (None: no token file, or a unary call: only streams are counted by caller).
_CALLER_TOKEN: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "placement_caller_token", default=None)


def caller_scope() -> Scope:
    """The scope of the call being handled: None (unscoped) or its caller's tenants."""
    return _CALLER_SCOPE.get()


def caller_of(context: grpc.ServicerContext) -> str:
    """The name a stream pool counts the caller of ``context`` by: its accepted token, else its
    client certificate's identities, else its address (``stream_shares.caller_name``)."""
    # a list of values per key (grpc's docs; the grpc-stubs say bytes, with a FIXME)
    auth = cast(Mapping[str, Sequence[bytes]], context.auth_context())
    return caller_name(_CALLER_TOKEN.get(), peer_identities(auth), context.peer())


def caller_shares(context: grpc.ServicerContext) -> bool:
    """Whether the caller of ``context`` holds at most its share of a stream pool
    (``stream_shares``): a tenant-scoped caller and one without credentials (known by its
    address) do; one that authenticated without a tenant scope (an operator's token, a client
    certificate listed unscoped, or, with no identities file, any the client CA signed: KEDA
    under mutual TLS) does not, as it is trusted with every tenant's data."""
    if caller_scope() is not None:
        return True
    auth = cast(Mapping[str, Sequence[bytes]], context.auth_context())
    return _CALLER_TOKEN.get() is None and not peer_identities(auth)


def _service_of(method: str) -> str:
    """``/pkg.Service/Method`` -> ``pkg.Service``."""
    return method.lstrip("/").partition("/")[0]


class CallerInterceptor(grpc.ServerInterceptor):
    """Authenticates every call outside ``TOKEN_EXEMPT_SERVICES`` and runs it with its
    caller's scope as ``caller_scope()``. With ``tokens``: a call without an accepted bearer
    token is UNAUTHENTICATED, before the handler runs. With ``identities``: a call whose client
    certificate (signed by the client CA: the handshake checked that) has no listed identity is
    UNAUTHENTICATED too, as the certificate is not a credential of this API (PERMISSION_DENIED is
    what an accepted caller's scope does not allow). The scope is the token's, the
    certificate's, or, with both, what both allow."""

    def __init__(self, tokens: BearerTokens | None,
                 on_refused: Callable[[str, str], None] | None = None,
                 identities: ClientIdentities | None = None) -> None:
        self.tokens, self.identities = tokens, identities
        #: called with (service, method) of each refused call (the server's metrics)
        self.on_refused = on_refused

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Any],
                          handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = str(handler_call_details.method)
        service = _service_of(method)
        if service in TOKEN_EXEMPT_SERVICES:
            if self.identities is None or service not in UNSCOPED_CERTIFICATE_SERVICES:
                return continuation(handler_call_details)
            handler = continuation(handler_call_details)
            return None if handler is None else _scoped(handler, self._unscoped(method))
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        token_scope: Scope = None
        token: str | None = None
        if self.tokens is not None:
            header = next((value for key, value in handler_call_details.invocation_metadata
                           or () if key == "authorization"), None)
            accepted = self.tokens.accepted(header)
            if accepted is None:
                problem = ("no bearer token: send metadata 'authorization: Bearer <token>'"
                           if header is None else "the bearer token is not accepted")
                self._refused(method, problem)
                return _refusal(handler, problem)
            token_scope = accepted.scope
            if handler.response_streaming:  # streams are counted by caller (stream_shares)
                token = token_name(_bearer(header))
        if self.identities is not None:
            return _scoped(handler, self._certificate_scope(method, token_scope), token)
        if token_scope is None and token is None:
            return handler
        return _scoped(handler, lambda _: token_scope, token)

    def _certificate_scope(self, method: str, token_scope: Scope
                           ) -> Callable[[grpc.ServicerContext], Scope]:
        """The scope of a call from its client certificate's identities (read in the handler:
        the interceptor sees no auth context), limited by ``token_scope``; an abort if none of
        them is listed."""
        assert self.identities is not None
        identities = self.identities

        def scope(context: grpc.ServicerContext) -> Scope:
            names, accepted = identities.scope(context)
            if accepted is not None:
                return intersection(token_scope, accepted.scope)
            shown = ", ".join(names) or "no cn:, dns: or uri: identity"
            problem = (f"client certificate ({shown}): signed by the client CA, but none of "
                       "its identities is listed in client_identities_file (UNAUTHENTICATED: "
                       "it is no credential of this API, as a token not in the token file)")
            self._refused(method, problem)
            context.abort(grpc.StatusCode.UNAUTHENTICATED, problem)

        return scope

    def _unscoped(self, method: str) -> Callable[[grpc.ServicerContext], Scope]:
        """``_certificate_scope`` without a token, and an abort (PERMISSION_DENIED) if the
        certificate is scoped to tenants: for UNSCOPED_CERTIFICATE_SERVICES."""
        listed = self._certificate_scope(method, None)

        def scope(context: grpc.ServicerContext) -> Scope:
            tenants = listed(context)
            if tenants is None:
                return None
            problem = (f"client certificate scoped to tenants {', '.join(sorted(tenants))}: "
                       f"{_service_of(method)} answers for every tenant's models, so only an "
                       "unscoped identity may call it (list KEDA's certificate identity alone "
                       "on its line of client_identities_file)")
            log.warning("placement API refused %s: %s", method, problem)
            context.abort(grpc.StatusCode.PERMISSION_DENIED, problem)

        return scope

    def _refused(self, method: str, problem: str) -> None:
        log.warning("placement API refused %s: %s", method, problem)
        if self.on_refused is not None:
            self.on_refused(_service_of(method), method.rpartition("/")[2])


def _bearer(header: str | bytes | None) -> bytes:
    """The token of an accepted ``authorization: Bearer <token>`` header."""
    raw = header.encode() if isinstance(header, str) else header or b""
    return raw.partition(b" ")[2].strip()


def _scoped(handler: grpc.RpcMethodHandler[Any, Any],
            scope_of_call: Callable[[grpc.ServicerContext], Scope],
            token: str | None = None) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` whose behaviour runs (and, streaming, is resumed) in a context of its own
    where ``caller_scope()`` is ``scope_of_call(context)`` (which may abort the call) and the
    caller's token name is ``token``, in the thread gRPC runs it in; serializers and the
    per-method thread pool (``experimental_thread_pool``) kept."""

    def run(behaviour: Callable[..., Any] | None) -> Callable[..., Any]:
        assert behaviour is not None  # the handler's own kind
        def unary(request: object, context: grpc.ServicerContext) -> Any:
            call = contextvars.copy_context()
            call.run(_CALLER_SCOPE.set, scope_of_call(context))
            return call.run(behaviour, request, context)

        def streaming(request: object, context: grpc.ServicerContext) -> Any:
            call = contextvars.copy_context()
            call.run(_CALLER_SCOPE.set, scope_of_call(context))
            call.run(_CALLER_TOKEN.set, token)
            responses = iter(call.run(behaviour, request, context))
            done = object()
            try:
                while (response := call.run(next, responses, done)) is not done:
                    yield response
            finally:
                close = getattr(responses, "close", None)
                if close is not None:
                    call.run(close)

        wrapped = streaming if handler.response_streaming else unary
        pool = getattr(behaviour, "experimental_thread_pool", None)
        if pool is not None:
            wrapped.experimental_thread_pool = pool  # type: ignore[attr-defined]
        return wrapped

    codec = {"request_deserializer": handler.request_deserializer,
             "response_serializer": handler.response_serializer}
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(run(handler.stream_stream), **codec)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(run(handler.stream_unary), **codec)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(run(handler.unary_stream), **codec)
    return grpc.unary_unary_rpc_method_handler(run(handler.unary_unary), **codec)


def _refusal(handler: grpc.RpcMethodHandler[Any, Any], problem: str
             ) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler that refuses the call UNAUTHENTICATED before its request is read: it takes
    the requests as a stream (one unary request is the same message on the wire) and never
    iterates them, as a unary-request handler would make gRPC receive and deserialize the
    whole message (up to the server's receive limit) first. Its responses: as ``handler``'s."""

    def deny(requests: object, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, problem)

    if handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(deny)
    return grpc.stream_unary_rpc_method_handler(deny)


def caller_interceptor(sec: TransportSecurity,
                       on_refused: Callable[[str, str], None] | None = None
                       ) -> CallerInterceptor | None:
    """What authenticates the calls, its files read and checked now (``SecurityFileError``
    naming the setting); None without a token file or a client identities file."""
    tokens, identities = read_credentials(sec)
    if tokens is None and identities is None:
        return None
    return CallerInterceptor(tokens, on_refused, identities)
