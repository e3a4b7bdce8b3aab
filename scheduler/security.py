"""Transport security of the placement API in production (DESIGN.md: "gRPC with TLS + token").

- TLS from PEM files (server certificate chain and key; with a client CA, mutual TLS: a client
  must present a certificate that CA signed). The files are re-read when they change, at the next
  handshake, so a rotated Secret (cert-manager) needs no restart; a rotation that cannot be read
  keeps the previous pair and logs why.
- A bearer token (``authorization: Bearer <token>`` metadata) on every call, from a file holding
  one token per line (two lines while clients move to a new token), re-read when it changes.
  Health checks (kubelet's gRPC probe sends no metadata) and KEDA's external scaler (KEDA sends
  none either; authenticate it with mutual TLS) need no token: both only read.
- A token may be scoped to tenants (``<token> tenant=<t1>[,<t2>...]``; ``scheduler.tenancy``):
  the interceptor makes the accepted token's scope the ``caller_scope()`` of the call, which the
  servicer enforces. Without a token file every call is unscoped.

Every file is checked at start (``check_files``): an unreadable or malformed file is a
``SecurityFileError`` naming the setting, and nothing is served."""

from __future__ import annotations

import contextvars
import hmac
import logging
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from scheduler.tenancy import Scope, TokenLineError, parse_token_file

log = logging.getLogger(__name__)

#: Services answered without a token (each only reads): health (kubelet's probe carries no
#: metadata) and KEDA's external scaler (KEDA sends none; mutual TLS authenticates it).
TOKEN_EXEMPT_SERVICES = frozenset({"grpc.health.v1.Health", "externalscaler.ExternalScaler"})
#: The scope of the token that authorized the call being handled (None: unscoped, also without
#: a token file); set by ``TokenInterceptor`` in the thread and context the handler runs in.
_CALLER_SCOPE: contextvars.ContextVar[Scope] = contextvars.ContextVar("placement_caller_scope",
                                                                      default=None)


def caller_scope() -> Scope:
    """The scope of the call being handled: None (unscoped) or the token's tenants."""
    return _CALLER_SCOPE.get()


class SecurityFileError(ValueError):
    """A TLS or token file that cannot be used; ``setting`` names it (e.g. ``tls_cert_file``)."""

    def __init__(self, setting: str, path: Path, problem: str) -> None:
        super().__init__(f"{setting} {path}: {problem}")
        self.setting, self.path, self.problem = setting, path, problem


@dataclass(frozen=True, slots=True)
class TransportSecurity:
    """What secures the server: TLS (cert and key together; a client CA asks for client
    certificates) and/or a token file. All None: plaintext without a token."""

    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_client_ca_file: Path | None = None
    token_file: Path | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert_file is not None

    def describe(self) -> str:
        """How the server is secured, in a few words: ``mutual TLS, bearer token``."""
        transport = ("plaintext" if not self.tls
                     else "mutual TLS" if self.tls_client_ca_file is not None else "TLS")
        return f"{transport}, {'bearer token' if self.token_file is not None else 'no token'}"


def _read(setting: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise SecurityFileError(setting, path, f"cannot read it ({error.strerror or error})"
                                ) from None


def _tls_pems(sec: TransportSecurity) -> tuple[bytes, bytes, bytes | None]:
    """(key, chain, client CA) read and checked with the ssl module: PEM, key matching the
    certificate, a CA file holding certificates."""
    assert sec.tls_cert_file is not None and sec.tls_key_file is not None
    chain = _read("tls_cert_file", sec.tls_cert_file)
    key = _read("tls_key_file", sec.tls_key_file)
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            sec.tls_cert_file, sec.tls_key_file)
    except ssl.SSLError as error:
        raise SecurityFileError("tls_cert_file", sec.tls_cert_file,
                                f"not a PEM certificate chain matching tls_key_file "
                                f"{sec.tls_key_file} ({error.reason or error})") from None
    ca = None
    if sec.tls_client_ca_file is not None:
        ca = _read("tls_client_ca_file", sec.tls_client_ca_file)
        try:
            ssl.create_default_context().load_verify_locations(cadata=ca.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError, ValueError) as error:
            raise SecurityFileError("tls_client_ca_file", sec.tls_client_ca_file,
                                    f"no PEM CA certificate in it ({error})") from None
    return key, chain, ca


def _stamp(paths: list[Path]) -> tuple[tuple[int, int], ...]:
    out = []
    for path in paths:
        try:
            st = path.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((-1, -1))
    return tuple(out)


def server_credentials(sec: TransportSecurity) -> grpc.ServerCredentials:
    """TLS credentials re-read at a handshake after any of their files changed."""
    key, chain, ca = _tls_pems(sec)
    paths = [p for p in (sec.tls_cert_file, sec.tls_key_file, sec.tls_client_ca_file)
             if p is not None]
    seen = {"stamp": _stamp(paths)}
    lock = threading.Lock()

    def fetch() -> Any:
        with lock:
            stamp = _stamp(paths)
            if stamp == seen["stamp"]:
                return None
            seen["stamp"] = stamp
            try:
                new_key, new_chain, new_ca = _tls_pems(sec)
            except SecurityFileError as error:
                log.error("placement API TLS files changed but cannot be used; keeping the "
                          "previous ones: %s", error)
                return None
            log.info("placement API TLS files changed: new handshakes use them")
            return grpc.ssl_server_certificate_configuration([(new_key, new_chain)], new_ca)

    initial = grpc.ssl_server_certificate_configuration([(key, chain)], ca)
    return grpc.dynamic_ssl_server_credentials(initial, fetch,
                                               require_client_authentication=ca is not None)


@dataclass(frozen=True, slots=True)
class Accepted:
    """An accepted token's scope (None: unscoped)."""

    scope: Scope


class BearerTokens:
    """The accepted tokens and their scopes (``scheduler.tenancy.parse_token_file``), re-read
    when the file changes; a changed file that is empty, malformed or unreadable keeps the
    previous tokens (and logs why)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp = _stamp([path])
        self._tokens = self._load()

    def _load(self) -> tuple[tuple[bytes, Scope], ...]:
        text = _read("token_file", self.path)
        try:
            tokens = parse_token_file(text)
        except TokenLineError as error:
            raise SecurityFileError("token_file", self.path, str(error)) from None
        if not tokens:
            raise SecurityFileError("token_file", self.path, "the file holds no token")
        return tokens

    def current(self) -> tuple[tuple[bytes, Scope], ...]:
        stamp = _stamp([self.path])
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._tokens = self._load()
                except SecurityFileError as error:
                    log.error("placement API token file changed but cannot be used; keeping "
                              "the previous tokens: %s", error)
            return self._tokens

    def accepted(self, header: str | bytes | None) -> Accepted | None:
        """The scope of the token an ``authorization`` header carries; None: not accepted."""
        if header is None:
            return None
        raw = header.encode() if isinstance(header, str) else header
        scheme, _, token = raw.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return None
        given = token.strip()
        # compare with every token, found or not: the time taken says nothing about them
        found: Accepted | None = None
        for known, scope in self.current():
            if hmac.compare_digest(given, known) and found is None:
                found = Accepted(scope)
        return found

    def accepts(self, header: str | bytes | None) -> bool:
        return self.accepted(header) is not None


def _service_of(method: str) -> str:
    """``/pkg.Service/Method`` -> ``pkg.Service``."""
    return method.lstrip("/").partition("/")[0]


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuses every call outside ``TOKEN_EXEMPT_SERVICES`` without an accepted bearer token:
    UNAUTHENTICATED, before the handler runs. A call with a scoped token runs with that scope as
    its ``caller_scope()``."""

    def __init__(self, tokens: BearerTokens,
                 on_refused: Callable[[str, str], None] | None = None) -> None:
        self.tokens = tokens
        #: called with (service, method) of each refused call (the server's metrics)
        self.on_refused = on_refused

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Any],
                          handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = str(handler_call_details.method)
        if _service_of(method) in TOKEN_EXEMPT_SERVICES:
            return continuation(handler_call_details)
        header = next((value for key, value in handler_call_details.invocation_metadata or ()
                       if key == "authorization"), None)
        accepted = self.tokens.accepted(header)
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        if accepted is not None:
            return handler if accepted.scope is None else _scoped(handler, accepted.scope)
        problem = ("no bearer token: send metadata 'authorization: Bearer <token>'"
                   if header is None else "the bearer token is not accepted")
        log.warning("placement API refused %s: %s", method, problem)
        if self.on_refused is not None:
            self.on_refused(_service_of(method), method.rpartition("/")[2])
        return _refusal(handler, problem)


def _scoped(handler: grpc.RpcMethodHandler[Any, Any], scope: frozenset[str]
            ) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` whose behaviour runs (and, streaming, is resumed) in a context of its own
    where ``caller_scope()`` is ``scope``, in the thread gRPC runs it in; serializers and the
    per-method thread pool (``experimental_thread_pool``) kept."""

    def run(behaviour: Callable[..., Any] | None) -> Callable[..., Any]:
        assert behaviour is not None  # the handler's own kind
        def unary(request: object, context: grpc.ServicerContext) -> Any:
            call = contextvars.copy_context()
            call.run(_CALLER_SCOPE.set, scope)
            return call.run(behaviour, request, context)

        def streaming(request: object, context: grpc.ServicerContext) -> Any:
            call = contextvars.copy_context()
            call.run(_CALLER_SCOPE.set, scope)
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
    def deny(request: object, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, problem)

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(deny)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(deny)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(deny)
    return grpc.unary_unary_rpc_method_handler(deny)


def check_files(sec: TransportSecurity) -> BearerTokens | None:
    """Every file read and checked now (``SecurityFileError`` naming the setting); the tokens."""
    if sec.tls:
        _tls_pems(sec)
    return BearerTokens(sec.token_file) if sec.token_file is not None else None
