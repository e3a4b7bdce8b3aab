"""Errors -> ActionOutcome, the same way for every actuator."""

from __future__ import annotations

from collections.abc import Callable

from controlplane.domain.actions import ActionOutcome
from controlplane.domain.errors import ConflictError, PermanentError, TransientError


def outcome_of(target: str, write: Callable[[], str]) -> ActionOutcome:
    """Run ``write`` (returns the success message) and map errors: a conflict or an unreachable
    API is retryable on the next tick; anything permanent is not."""
    try:
        return ActionOutcome(target, True, write())
    except ConflictError as error:
        return ActionOutcome(target, False, f"conflict, re-read next tick: {error}",
                             retryable=True)
    except TransientError as error:
        return ActionOutcome(target, False, str(error), retryable=True)
    except PermanentError as error:
        return ActionOutcome(target, False, str(error), retryable=False)


def failed(target: str, message: str, retryable: bool = False) -> ActionOutcome:
    return ActionOutcome(target, False, message, retryable=retryable)
