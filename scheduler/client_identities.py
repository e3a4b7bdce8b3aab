"""Tenant scopes of mutual-TLS client certificates (pure): the client identities file's line
format and the scope a certificate's identities give.

Each line names one identity of a client certificate, alone (unscoped: every call, every
binding) or with the tenants it is scoped to, as a token file line does (``scheduler.tenancy``)::

    cn:keda-operator
    uri:spiffe://cluster.local/ns/router-a/sa/default tenant=team-a
    dns:router-b.serving.svc tenant=team-b,team-c

``cn:`` is the subject's common name, ``dns:`` a DNS name and ``uri:`` a URI (a SPIFFE id) of
its subject alternative names. A name with spaces goes in double quotes, where a backslash
escapes the next character (``cn:"KEDA Operator"``, ``cn:"say \\"hi\\""``). ``#`` starts a
comment line; blank lines are skipped. A DNS name matches whatever its case; a common name and a
URI match exactly.

A certificate's identities come from gRPC's auth context: ``x509_common_name``, and the SANs by
their type, ``peer_dns`` and ``peer_uri``. ``x509_subject_alternative_name`` is not used: it
lists DNS names, URIs, e-mail addresses and IPs untyped, so ``dns:x`` could match a URI SAN
``x``. A certificate whose identities match several lines has the union of their scopes
(unscoped if one is); one matching none is not a caller of the API.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from scheduler.tenancy import TENANT_KEY, Scope, parse_scope, skipped_line, union

#: identity prefix -> the auth context key holding the certificate's values of that kind
AUTH_CONTEXT_KEYS = {"cn": "x509_common_name", "dns": "peer_dns", "uri": "peer_uri"}
_FORMAT = ("<identity> or <identity> tenant=<t1>[,<t2>...], where an identity is cn:<name>, "
           "dns:<name> or uri:<uri>; a name with spaces in double quotes")
#: ``kind:"..."``: a quoted value (backslash escapes the next character), then the rest
_QUOTED = re.compile(rb'\s*([^\s:"]*):"((?:[^"\\]|\\.)*)("?)(\S*)(.*)', re.DOTALL)
_ESCAPED = re.compile(rb"\\(.)", re.DOTALL)


class IdentityLineError(ValueError):
    """A malformed client identities file line; the message names its line number."""

    def __init__(self, line_no: int, problem: str) -> None:
        super().__init__(f"line {line_no}: {problem} (expected {_FORMAT})")
        self.line_no = line_no


def _identity(field: bytes) -> str:
    """``kind:value`` of a line's first field (a DNS name lower-cased); ValueError otherwise."""
    try:
        text = field.decode()
    except UnicodeDecodeError:
        raise ValueError("an identity that is not UTF-8") from None
    kind, sep, value = text.partition(":")
    if not sep or kind not in AUTH_CONTEXT_KEYS:
        raise ValueError(f"an identity starts with {', '.join(k + ':' for k in AUTH_CONTEXT_KEYS)}"
                         f" not {text.split(':')[0]!r}")
    if not value:
        raise ValueError(f"an empty {kind}: identity")
    if kind == "uri" and ":" not in value:
        raise ValueError(f"uri:{value} has no scheme (a SPIFFE id is uri:spiffe://...)")
    return f"dns:{value.lower()}" if kind == "dns" else text


def _fields(line: bytes) -> tuple[bytes, list[bytes], bool]:
    """The identity field of a line (a quoted value unquoted), the fields after it, and
    whether the value was quoted."""
    quoted = _QUOTED.match(line)
    if quoted is None:
        first, *rest = line.split()
        return first, rest, False
    kind, value, closed, glued, rest_text = quoted.groups()
    if not closed:
        raise ValueError("an opening double quote without its closing one")
    if glued:
        raise ValueError("a closing double quote must end the identity (a space, then tenant=)")
    return kind + b":" + _ESCAPED.sub(rb"\1", value), rest_text.split(), True


def _unquoted_spaces(identity: str, rest: list[bytes]) -> str:
    """The hint for ``cn:KEDA Operator``: the name as it should be written."""
    words = [f.decode(errors="replace") for f in rest if not f.startswith(TENANT_KEY + b"=")]
    kind, _, value = " ".join([identity, *words]).partition(":")
    return f'a name with spaces goes in double quotes: {kind}:"{value}"'


def parse_identity_line(line: bytes, line_no: int) -> tuple[str, Scope]:
    """(identity, scope) of one line that is neither blank nor a comment."""
    try:
        first, rest, quoted = _fields(line)
        if first.startswith(TENANT_KEY + b"="):
            raise ValueError("no identity before tenant=")
        identity = _identity(first)
        if rest and b"=" not in rest[0] and not quoted:
            raise ValueError(_unquoted_spaces(identity, rest))
        return identity, parse_scope(rest, "identity")
    except ValueError as error:
        raise IdentityLineError(line_no, str(error)) from None


def parse_identity_file(text: bytes) -> dict[str, Scope]:
    """Every identity of a client identities file with its scope, in file order; an identity
    listed twice must have the same scope both times."""
    first: dict[str, tuple[int, Scope]] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if skipped_line(line):
            continue
        identity, scope = parse_identity_line(line, line_no)
        seen_at, seen_scope = first.setdefault(identity, (line_no, scope))
        if seen_scope != scope:
            raise IdentityLineError(line_no, f"{identity} is on line {seen_at} with another "
                                             "scope")
    return {identity: scope for identity, (_, scope) in first.items()}


def peer_identities(auth_context: Mapping[str, Sequence[bytes]]) -> tuple[str, ...]:
    """The identities of the client certificate an auth context describes (``cn:...``,
    ``dns:...``, ``uri:...``; an empty common name and a value that is not UTF-8 left out)."""
    found: list[str] = []
    for kind, key in AUTH_CONTEXT_KEYS.items():
        for raw in auth_context.get(key, ()):
            try:
                value = raw.decode()
            except UnicodeDecodeError:
                continue
            if value:
                found.append(f"{kind}:{value.lower() if kind == 'dns' else value}")
    return tuple(dict.fromkeys(found))


def scope_of(listed: Mapping[str, Scope], identities: Iterable[str]) -> tuple[bool, Scope]:
    """(listed, scope): whether any of ``identities`` is listed, and the union of their scopes."""
    matched = [listed[identity] for identity in identities if identity in listed]
    return bool(matched), union(matched)
