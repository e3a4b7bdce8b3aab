"""The streams of KEDA's external scaler (``controlplane.adapters.keda``): StreamIsActive and
StreamMetricSpec send the current answer at once and then each change, polled every ``poll_s``;
once a stream has answered, a retryable error (``RETRYABLE``) skips an update, logged once, instead
of ending it. Each open stream is counted among ``max_streams`` and its caller's share of them
(``scheduler.stream_shares``) while its thread serves it, and refused beyond them. ``KedaStreams``
holds this machinery; ``KedaScalerServicer`` sets its state and serves the two RPCs with it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import grpc

from controlplane.adapters.keda_query import ScalerError
from scheduler.callers import caller_of, caller_shares
from scheduler.service import bounded_details
from scheduler.stream_shares import POOL_FULL, Refusal, StreamSlots, caller_cap

log = logging.getLogger("headroom.keda")

#: How soon a stream waiting for its next poll sees ``stopping`` (its call's end: at once).
STOP_CHECK_S = 0.25
#: Errors a stream outlives once it has answered: the store or the forecast is back next poll.
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION})


class KedaStreams:
    """The polling, counting and refusal of KedaScalerServicer's streams."""

    def __init__(self, poll_s: float, stopping: threading.Event | None, max_streams: int,
                 caller_share: float | None) -> None:
        if max_streams <= 0:
            raise ValueError(f"max_streams must be > 0, got {max_streams}")
        if caller_share is not None and not 0 < caller_share <= 1:
            raise ValueError(f"caller_share must be in (0, 1], got {caller_share}")
        self._poll_s = poll_s
        self.stopping = stopping or threading.Event()
        #: streams served at once; give the gRPC server this many worker threads more
        self.max_streams = max_streams
        #: the share of them one caller may hold (None: no per-caller cap)
        self.caller_share = caller_share
        self._streams = StreamSlots(max_streams, None if caller_share is None
                                    else caller_cap(max_streams, caller_share))

    def _poll(self, context: grpc.ServicerContext, read: Callable[[], object],
              ended: threading.Event) -> Iterator[object]:
        """The current answer at once, then each change, until the call (``ended``) or server
        ends. Once it has answered, a retryable error (``RETRYABLE``: the store down, the
        forecast stale for a while) skips the update, logged once per run of them, and the
        stream stays open: ended, KEDA would reopen it after a backoff that doubles each time
        (2 s to 1 min). Any other error (bad metadata, no forecast), or one before the first
        answer, ends it."""
        last: object = None
        first = True
        skipping = False
        while context.is_active() and not ended.is_set() and not self.stopping.is_set():
            try:
                current = read()
            except ScalerError as error:
                if first or error.code not in RETRYABLE:
                    context.abort(error.code, bounded_details(str(error)))
                    raise
                if not skipping:
                    log.warning("keda.stream_update_skipped",
                                extra={"code": error.code.name, "error": str(error)})
                skipping = True
            else:
                skipping = False
                if first or current != last:
                    yield current
                    first, last = False, current
            self._pause(ended)

    def _pause(self, ended: threading.Event) -> None:
        """Wait ``poll_s``, or less: until the call ends (its thread goes back to the pool at
        once, not up to ``poll_s`` later) or the server stops (seen within STOP_CHECK_S)."""
        until = time.monotonic() + self._poll_s
        while not self.stopping.is_set():
            left = until - time.monotonic()
            if left <= 0 or ended.wait(min(left, STOP_CHECK_S)):
                return

    def _stream(self, context: grpc.ServicerContext, refused: grpc.StatusCode, hint: str,
                read: Callable[[], object]) -> Iterator[object]:
        """``_poll`` of ``read``, counted among ``max_streams`` and its caller's share of them
        (``caller_of``) until its thread leaves it (so the cap bounds the threads streams hold),
        or aborted with ``refused`` when ``max_streams`` are already open or its caller holds
        its share."""
        caller = caller_of(context)
        full = self._streams.take(caller, caller_shares(context))
        if full is not None:
            context.abort(refused, self._refusal(full, caller, hint))
        ended = threading.Event()
        try:
            if context.add_callback(ended.set):  # False: the call has already ended
                yield from self._poll(context, read, ended)
        finally:
            self._streams.drop(caller)

    def _refusal(self, full: Refusal, caller: str, hint: str) -> str:
        if full == POOL_FULL:
            return f"all {self.max_streams} streams of this scaler are open; {hint}"
        return bounded_details(
            f"{caller} already holds {self._streams.per_caller} streams of this scaler, the "
            f"most one caller may hold (autoscaling.keda_caller_share {self.caller_share:g} of "
            f"its {self.max_streams}), so that no caller takes them all; {hint}, close one of "
            "its streams, or, for a KEDA with more external-push ScaledObjects (two streams "
            "each), raise autoscaling.keda_caller_share")

    def open_streams(self) -> int:
        return self._streams.open()
