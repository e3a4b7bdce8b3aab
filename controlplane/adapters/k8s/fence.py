"""Fencing: the Kubernetes requests a leader-gated actuator makes end by the leader's deadline.

``LeaderGated`` checks leadership when an actuator call starts; the call then makes one or more
requests, each allowed ``k8s.request_timeout_s``. Without a fence a write sent just before the
renew deadline could still be in flight, and land, after a follower took the Lease over. So
each gated call runs inside ``leading_until(now, until_at)``: the deadline, carried over onto
the monotonic scale requests time out on, is held in a context variable, and ``KubeApi``

- sends no request once the deadline has passed (``LeadershipEnded``, retryable
  ``not_leader``);
- cuts each request's timeout to the time left, so it stops waiting at the deadline; a request
  cut short that way is ``LeadershipEnded`` too, not "unreachable";
- lets urllib3 retry a failed attempt only while the retry, too, would end by the deadline.

What it cannot do: take back a request the API server received before the deadline. The
apiserver drops a write whose client hung up before it was stored, but one it was already
storing may land after the deadline; a follower takes over no earlier than
``lease_duration_s - renew_deadline_s`` after that deadline (5 s by default).

No fence is active outside a gated call (the reader, the elector's own Lease requests): those
requests keep the full timeout. A dry run's elector has no deadline, so its calls are unfenced.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

import urllib3
from urllib3.util.retry import Retry

from controlplane.domain.errors import TransientError
from controlplane.domain.lease import deadline_on_scale_s, fenced_timeout_s

_deadline_s: ContextVar[float | None] = ContextVar("headroom_k8s_leader_deadline_s",
                                                   default=None)
_attempt_s: ContextVar[float | None] = ContextVar("headroom_k8s_attempt_s", default=None)
ENDED = "not_leader: leadership ended (the renew deadline passed)"


class LeadershipEnded(TransientError):
    """A gated call's request was not sent, or was given up, at the leader's deadline."""


def monotonic_s() -> float:
    """The scale requests time out on (urllib3 and the socket layer wait in real time)."""
    return time.monotonic()


@contextmanager
def fenced(deadline_s: float | None) -> Iterator[None]:
    """Requests made inside end by ``deadline_s`` (on ``monotonic_s``); None: no fence."""
    token = _deadline_s.set(deadline_s)
    try:
        yield
    finally:
        _deadline_s.reset(token)


@contextmanager
def leading_until(now: datetime, until_at: datetime | None) -> Iterator[None]:
    """Fence to ``until_at``, an instant on the clock that reads ``now`` (None: no end)."""
    deadline = None if until_at is None else deadline_on_scale_s(now, until_at, monotonic_s())
    with fenced(deadline):
        yield


@contextmanager
def request_timeout(timeout_s: float, what: str) -> Iterator[float]:
    """The timeout of one request (``timeout_s``, cut to the time the fence leaves); raises
    ``LeadershipEnded`` instead when none is left, so the request is not sent."""
    capped = fenced_timeout_s(timeout_s, _deadline_s.get(), monotonic_s())
    if capped is None:
        raise LeadershipEnded(f"{ENDED}: {what} not sent")
    token = _attempt_s.set(capped)
    try:
        yield capped
    finally:
        _attempt_s.reset(token)


def cut_short(timeout_s: float, capped_s: float, error: BaseException) -> bool:
    """Whether a failed request failed because the fence ended it: its deadline has passed, or
    the request timed out on a timeout the fence had cut."""
    if _deadline_s.get() is None:
        return False
    return deadline_passed() or (capped_s < timeout_s and _timed_out(error))


def _timed_out(error: BaseException) -> bool:
    if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason is not None:
        return _timed_out(error.reason)
    return isinstance(error, urllib3.exceptions.TimeoutError | TimeoutError)


def deadline_passed() -> bool:
    """Whether a fence is active and its deadline has passed (this replica no longer leads)."""
    deadline = _deadline_s.get()
    return deadline is not None and monotonic_s() >= deadline


def may_retry() -> bool:
    """Whether another attempt of the request in flight would still end by the deadline."""
    deadline, attempt = _deadline_s.get(), _attempt_s.get()
    return deadline is None or attempt is None or deadline - monotonic_s() >= attempt


class FencedRetry(Retry):
    """urllib3's retries (a timed-out GET or PUT, a failed connect), none past the fence."""

    def is_exhausted(self) -> bool:
        return bool(super().is_exhausted()) or not may_retry()


_RETRY_FIELDS = ("total", "connect", "read", "redirect", "status", "other", "allowed_methods",
                 "status_forcelist", "backoff_factor", "backoff_max", "raise_on_redirect",
                 "raise_on_status", "respect_retry_after_header", "remove_headers_on_redirect",
                 "backoff_jitter")


def fence_retries(api_client: Any) -> None:
    """Make ``api_client``'s urllib3 retries (the configured ones, else urllib3's default)
    stop at the fence, so a retry is never sent after the deadline."""
    pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    pool_kw = getattr(pool_manager, "connection_pool_kw", None)
    if not isinstance(pool_kw, dict):
        return
    configured = pool_kw.get("retries")
    if configured is False or isinstance(configured, FencedRetry):
        return
    base = Retry.from_int(configured)  # None: urllib3's default (3); an int: that many
    pool_kw["retries"] = FencedRetry(**{name: getattr(base, name) for name in _RETRY_FIELDS})
