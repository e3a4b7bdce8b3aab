"""Errors -> ActionOutcome, the same way for every actuator."""

from __future__ import annotations

from collections.abc import Callable

from controlplane.domain.actions import ActionOutcome
from controlplane.domain.errors import ConflictError, PermanentError, TransientError


def outcome_of(target: str, write: Callable[[], str | ActionOutcome]) -> ActionOutcome:
    """Run ``write`` (returns the success message, or an outcome such as ``pending``) and map
    errors: a conflict or an unreachable API is retryable on the next tick; anything permanent
    is not."""
    try:
        done = write()
        return done if isinstance(done, ActionOutcome) else ActionOutcome(target, True, done)
    except ConflictError as error:
        return ActionOutcome(target, False, f"conflict, re-read next tick: {error}",
                             retryable=True)
    except TransientError as error:
        return ActionOutcome(target, False, str(error), retryable=True)
    except PermanentError as error:
        return ActionOutcome(target, False, str(error), retryable=False)


def failed(target: str, message: str, retryable: bool = False) -> ActionOutcome:
    return ActionOutcome(target, False, message, retryable=retryable)


def pending(target: str, message: str) -> ActionOutcome:
    """Not done yet, and not a failure: the change waits for something to happen first (a
    config to propagate). Retryable and not ok, so nothing counts it as done and the next tick
    applies the same target again."""
    return ActionOutcome(target, False, message, retryable=True)
