"""Tenant scopes of placement API tokens (pure): the token file's line format and what a caller
of each scope may do. Client certificates get scopes the same way
(``scheduler.client_identities``); a call with both has their ``intersection``.

A token file line ``<token>`` alone is an unscoped (operator) token: every call, every binding.
``<token> tenant=<t1>[,<t2>...]`` scopes the token to those tenants:

- Place only for one of them (an empty ``tenant`` is refused), and only a model the models table
  lists under one of them, or lists not at all (``check_model``);
- Release only their bindings (another tenant's: PERMISSION_DENIED; an id bound to nobody is
  released as ever: nothing to do);
- RenewLeases and RankReplicas treat another tenant's ids as ``unknown`` (not bound), so a
  scoped caller learns nothing of them, and renew or rank only their own;
- ListBindings lists only their bindings;
- SyncInventory and PlanFleet (writes to the whole fleet) are refused; GetPlan, WatchPlan (the
  fleet plan, read only) and reflection are allowed. The DemandHints service beside it refuses
  AddHint and RemoveHint (``controlplane.adapters.hints_grpc``) and allows ListHints.

``#`` starts a comment line and blank lines are skipped, as in the client identities file
(``skipped_line``), so no token begins with ``#``.

Workload ids are one namespace for the whole fleet: a scoped caller cannot Place an id another
tenant's binding holds (ALREADY_EXISTS, that binding left out of the reply), so it learns the id
is taken; serving layers prefix their ids with their tenant. A binding whose tenant is ""
(journaled before bindings recorded their tenant) belongs to unscoped tokens only. Refusals
are PERMISSION_DENIED (``PermissionDenied``), never UNAUTHENTICATED, which says the token itself
is not accepted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from scheduler.domain.errors import InvalidArgument

#: A caller's scope: None = unscoped (every tenant, the whole fleet), else its tenants.
Scope = frozenset[str] | None
#: Placement calls that change the whole fleet: unscoped tokens only.
FLEET_WIDE_METHODS = frozenset({"SyncInventory", "PlanFleet"})
TENANT_KEY = b"tenant"
_FORMAT = "<token> or <token> tenant=<t1>[,<t2>...]"


class PermissionDenied(Exception):
    """A call its caller's scope does not allow (gRPC PERMISSION_DENIED); the message names the
    tenant or workload."""


class TokenLineError(ValueError):
    """A malformed token file line; the message names the line number, never its text."""

    def __init__(self, line_no: int, problem: str) -> None:
        super().__init__(f"line {line_no}: {problem} (expected {_FORMAT})")
        self.line_no = line_no


class HasTenant(Protocol):
    @property
    def tenant(self) -> str: ...


B = TypeVar("B", bound=HasTenant)


def parse_scope(fields: list[bytes], what: str) -> Scope:
    """The scope the fields after a line's ``what`` (a token, an identity) give: none (None,
    unscoped) or one ``tenant=<t1>[,<t2>...]``; ValueError saying what is wrong otherwise."""
    if not fields:
        return None
    a_what = f"{'an' if what[0] in 'aeiou' else 'a'} {what}"
    if len(fields) > 1:
        raise ValueError(f"more than one field after the {what} ({a_what} holds no spaces; "
                         "list tenants comma-separated)")
    key, sep, value = fields[0].partition(b"=")
    if not sep or key != TENANT_KEY:
        raise ValueError(f"after the {what} only tenant= may follow ({a_what} holds no spaces)")
    names = value.split(b",")
    if not all(names):
        raise ValueError("an empty tenant name: tenant= lists one or more, comma-separated")
    try:
        return frozenset(name.decode() for name in names)
    except UnicodeDecodeError:
        raise ValueError("a tenant name that is not UTF-8") from None


def skipped_line(line: bytes) -> bool:
    """Whether a token file or client identities file line holds nothing: blank, or a comment
    (``#`` first, after any spaces)."""
    return not line.strip() or line.lstrip().startswith(b"#")


def parse_token_line(line: bytes, line_no: int) -> tuple[bytes, Scope]:
    """(token, scope) of one non-blank line; TokenLineError naming ``line_no`` otherwise."""
    token, *rest = line.split()
    if token.startswith(TENANT_KEY + b"="):
        raise TokenLineError(line_no, "no token before tenant=")
    if not all(0x21 <= byte <= 0x7E for byte in token):
        # gRPC metadata carries printable ASCII only: no client could ever send it
        raise TokenLineError(line_no, "the token holds a byte that is not printable ASCII")
    try:
        return token, parse_scope(rest, "token")
    except ValueError as error:
        raise TokenLineError(line_no, str(error)) from None


def parse_token_file(text: bytes) -> tuple[tuple[bytes, Scope], ...]:
    """Every token of a token file with its scope, in file order; blank and comment lines are
    skipped (``skipped_line``), a token listed twice must have the same scope both times (it is
    kept once)."""
    first: dict[bytes, tuple[int, Scope]] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if skipped_line(line):
            continue
        token, scope = parse_token_line(line, line_no)
        seen_at, seen_scope = first.setdefault(token, (line_no, scope))
        if seen_scope != scope:
            raise TokenLineError(line_no, f"the token of line {seen_at} with another scope")
    return tuple((token, scope) for token, (_, scope) in first.items())


def union(scopes: Iterable[Scope]) -> Scope:
    """The scope of a caller holding each of ``scopes`` (several matching client identities):
    unscoped if any is, else all their tenants."""
    tenants: set[str] = set()
    for scope in scopes:
        if scope is None:
            return None
        tenants |= scope
    return frozenset(tenants)


def intersection(first: Scope, second: Scope) -> Scope:
    """The scope of a caller that two credentials (a token and a client certificate) each
    limit: what both allow (unscoped is every tenant: the other's scope; possibly none)."""
    if first is None:
        return second
    return first if second is None else first & second


def may_act_for(scope: Scope, tenant: str) -> bool:
    """Whether a caller of ``scope`` may act for ``tenant`` ("" = not recorded: unscoped only)."""
    return scope is None or tenant in scope


def _tenants(scope: frozenset[str]) -> str:
    # empty: a token and a client certificate scoped to tenants with none in common
    return ", ".join(sorted(scope)) or "(none: its token's and certificate's share none)"


def check_fleet_wide(scope: Scope, method: str) -> None:
    """PermissionDenied when ``method`` changes the whole fleet and the caller is scoped."""
    if scope is not None and method in FLEET_WIDE_METHODS:
        raise PermissionDenied(f"{method} changes the whole fleet: it needs an unscoped caller "
                               "(token or certificate), not one scoped to tenants "
                               f"{_tenants(scope)}")


def check_place(scope: Scope, tenant: str) -> None:
    """PermissionDenied unless a caller of ``scope`` may place for ``tenant``."""
    if may_act_for(scope, tenant):
        return
    assert scope is not None
    wanted = f"tenant {tenant!r}" if tenant else "an empty tenant"
    raise PermissionDenied(f"tenant: this caller may not place for {wanted}; it is scoped to "
                           f"tenants {_tenants(scope)}")


def check_model(scope: Scope, tenant: str, model: str, listed_tenant: str | None) -> None:
    """PermissionDenied when the models table lists ``model`` under a tenant outside ``scope``
    (as DemandHints' AddHint refuses a hint for it), else InvalidArgument naming ``tenant`` when
    the Place names another tenant than the listed one: its binding would be visible to, and
    releasable by, the wrong tenant's callers. ``listed_tenant`` None (a model the table does
    not list, free text, or a server without a models table) and an empty ``tenant`` from an
    unscoped caller pass: the binding keeps what the Place named."""
    if listed_tenant is None:
        return
    if not may_act_for(scope, listed_tenant):
        assert scope is not None
        raise PermissionDenied(f"model: {model} is not a model of the caller's tenants "
                               f"({_tenants(scope)})")
    if tenant and tenant != listed_tenant:
        raise InvalidArgument("tenant", f"{tenant!r} is not the tenant of model {model!r}: "
                                        f"the models table lists it under {listed_tenant!r}")


def check_release(scope: Scope, workload_id: str, tenant: str | None) -> None:
    """PermissionDenied when ``workload_id`` is bound (``tenant`` not None) for a tenant outside
    ``scope``; an id bound to nobody is anyone's to release (nothing happens)."""
    if tenant is None or may_act_for(scope, tenant):
        return
    raise PermissionDenied(f"workload_id {workload_id!r}: bound for another tenant; this caller "
                           f"may release only bindings of tenants {_tenants(scope or frozenset())}")


def visible(scope: Scope, bindings: Iterable[B]) -> list[B]:
    """The bindings a caller of ``scope`` may see, in their order."""
    return [b for b in bindings if may_act_for(scope, b.tenant)]
