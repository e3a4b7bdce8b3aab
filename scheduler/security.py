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
  servicer and engine enforce. Without a token file every call is unscoped.
- With mutual TLS, a client identities file (``scheduler.client_identities``) maps client
  certificates (common name, DNS and URI SANs) to scopes the same way, re-read when it changes:
  a certificate none of whose identities is listed is refused (UNAUTHENTICATED); with a token
  too, the call's scope is what both allow. The exempt services stay exempt.

The interceptor that authenticates each call with them is ``scheduler.callers``. Every file
is checked at start (``check_files``): an unreadable or malformed file is a
``SecurityFileError`` naming the setting, and nothing is served."""

from __future__ import annotations

import hmac
import logging
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import grpc

from scheduler.client_identities import (
    IdentityLineError,
    parse_identity_file,
    peer_identities,
    scope_of,
)
from scheduler.tenancy import Scope, TokenLineError, parse_token_file

log = logging.getLogger(__name__)
T = TypeVar("T")

class SecurityFileError(ValueError):
    """A TLS, token or identities file that cannot be used; ``setting`` names it (e.g.
    ``tls_cert_file``)."""

    def __init__(self, setting: str, path: Path, problem: str) -> None:
        super().__init__(f"{setting} {path}: {problem}")
        self.setting, self.path, self.problem = setting, path, problem


@dataclass(frozen=True, slots=True)
class TransportSecurity:
    """What secures the server: TLS (cert and key together; a client CA asks for client
    certificates, whose identities a client identities file maps to tenants) and/or a token
    file. All None: plaintext without a token."""

    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_client_ca_file: Path | None = None
    token_file: Path | None = None
    #: client certificate identities -> tenant scopes (``scheduler.client_identities``); needs
    #: ``tls_client_ca_file``
    client_identities_file: Path | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert_file is not None

    def describe(self) -> str:
        """How the server is secured, in a few words: ``mutual TLS, bearer token``."""
        transport = ("plaintext" if not self.tls
                     else "TLS" if self.tls_client_ca_file is None
                     else "mutual TLS" if self.client_identities_file is None
                     else "mutual TLS, client identities")
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
    """An accepted token's or client certificate's scope (None: unscoped)."""

    scope: Scope


class _WatchedFile(Generic[T]):
    """What ``parse`` makes of a file, re-read when the file's stamp (mtime, size) changes; a
    changed file that cannot be used (``SecurityFileError``) keeps the previous value and logs
    why. The first read raises."""

    def __init__(self, setting: str, path: Path, parse: Callable[[bytes], T]) -> None:
        self.setting, self.path, self._parse = setting, path, parse
        self._lock = threading.Lock()
        self._stamp = _stamp([path])
        self._value = parse(_read(setting, path))

    def current(self) -> T:
        stamp = _stamp([self.path])
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._value = self._parse(_read(self.setting, self.path))
                    log.info("placement API %s changed: calls now use it", self.setting)
                except SecurityFileError as error:
                    log.error("placement API %s changed but cannot be used; keeping the "
                              "previous one: %s", self.setting, error)
            return self._value


class BearerTokens:
    """The accepted tokens and their scopes (``scheduler.tenancy.parse_token_file``), re-read
    when the file changes; a changed file that is empty, malformed or unreadable keeps the
    previous tokens (and logs why)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = _WatchedFile("token_file", path, self._parse)

    def _parse(self, text: bytes) -> tuple[tuple[bytes, Scope], ...]:
        try:
            tokens = parse_token_file(text)
        except TokenLineError as error:
            raise SecurityFileError("token_file", self.path, str(error)) from None
        if not tokens:
            raise SecurityFileError("token_file", self.path, "the file holds no token")
        return tokens

    def current(self) -> tuple[tuple[bytes, Scope], ...]:
        return self._file.current()

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


class ClientIdentities:
    """The listed client certificate identities and their scopes
    (``scheduler.client_identities``), re-read when the file changes as the tokens are."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = _WatchedFile("client_identities_file", path, self._parse)

    def _parse(self, text: bytes) -> dict[str, Scope]:
        try:
            return parse_identity_file(text)
        except IdentityLineError as error:
            raise SecurityFileError("client_identities_file", self.path, str(error)) from None

    def scope(self, context: grpc.ServicerContext) -> tuple[tuple[str, ...], Accepted | None]:
        """The identities of the call's client certificate, and their scope (None: none of
        them is listed)."""
        # a list of values per key (grpc's docs; the grpc-stubs say bytes, with a FIXME)
        auth = cast(Mapping[str, Sequence[bytes]], context.auth_context())
        identities = peer_identities(auth)
        listed, scope = scope_of(self._file.current(), identities)
        return identities, Accepted(scope) if listed else None


def read_credentials(sec: TransportSecurity
                     ) -> tuple[BearerTokens | None, ClientIdentities | None]:
    """The token file and the client identities file, read and checked now
    (``SecurityFileError`` naming the setting), each None when not set."""
    if sec.client_identities_file is not None and sec.tls_client_ca_file is None:
        raise SecurityFileError("client_identities_file", sec.client_identities_file,
                                "needs tls_client_ca_file (mutual TLS): without client "
                                "certificates no call has an identity")
    return (BearerTokens(sec.token_file) if sec.token_file is not None else None,
            ClientIdentities(sec.client_identities_file)
            if sec.client_identities_file is not None else None)


def check_files(sec: TransportSecurity) -> None:
    """Every file read and checked now (``SecurityFileError`` naming the setting)."""
    if sec.tls:
        _tls_pems(sec)
    read_credentials(sec)
