"""Typed domain errors of the placement engine.

The gRPC servicer maps them to status codes: ``InvalidArgument`` -> INVALID_ARGUMENT,
``Infeasible`` -> RESOURCE_EXHAUSTED, ``NotReady`` -> FAILED_PRECONDITION, ``AlreadyExists`` ->
ALREADY_EXISTS, ``CallerGone`` -> CANCELLED, ``Unavailable`` -> UNAVAILABLE. The message always
carries the field or reason so a caller can act on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.domain.model import Binding


class PlacementError(Exception):
    """Base class of every error the placement domain raises on purpose."""


class InvalidArgument(PlacementError):
    """A request is malformed; ``field`` names the offending field (dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Infeasible(PlacementError):
    """A well-formed request cannot be satisfied with the current inventory.

    ``reason`` is a lowercase snake_case code; ``detail`` is a human-readable explanation.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class NotReady(PlacementError):
    """A well-formed request the server cannot answer yet, whatever the fleet holds: a Place
    before any SyncInventory since the server started (reason ``no_inventory``) knows no fleet,
    which is not a full one. ``reason`` and ``detail`` as for ``Infeasible``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class AlreadyExists(PlacementError):
    """A workload with this id is already bound; Place is not applied twice. ``binding``: the
    binding held under the id, where the engine knows it (a retry after a timeout learns
    where its first Place bound)."""

    def __init__(self, workload_id: str) -> None:
        super().__init__(f"workload_id {workload_id!r} is already bound")
        self.workload_id = workload_id
        self.binding: Binding | None = None


class CallerGone(PlacementError):
    """The caller gave up (deadline passed or cancelled) before the result was stored; nothing
    was changed."""

    def __init__(self, what: str) -> None:
        super().__init__(f"the caller is gone (deadline passed or cancelled): {what}")


class Unavailable(PlacementError):
    """The engine's journal could not record a change (its store is down, or another server
    took the store's placement state over); nothing was changed."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
