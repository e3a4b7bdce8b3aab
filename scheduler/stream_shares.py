"""Fair shares of a pool of long-lived streams (WatchPlan's, KEDA's scaler's): each open stream
holds a server thread, so a pool is capped, and within it one caller may hold at most its share,
so that a single caller (one token, one client certificate, one address) cannot take every stream
and lock the others out. The decision is pure (``refusal``); ``StreamSlots`` counts the open
streams of one pool by caller under a lock.

A caller is named by ``caller_name``: its accepted bearer token (by a digest, never the token),
else its client certificate's identities, else its address (``context.peer()`` without the
port): a caller without credentials is known by where it calls from."""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Sequence
from typing import Literal

#: The share of a stream pool one caller may hold by default: a quarter, at least 1 stream.
DEFAULT_CALLER_SHARE = 0.25
#: ``refusal``'s answers: every stream of the pool is open / the caller holds its share.
POOL_FULL: Literal["pool_full"] = "pool_full"
CALLER_FULL: Literal["caller_full"] = "caller_full"
Refusal = Literal["pool_full", "caller_full"]


def caller_cap(pool: int, share: float) -> int:
    """Streams of a pool of ``pool`` one caller may hold: ``share`` of them, at least 1."""
    return max(1, math.floor(pool * share + 1e-9))  # 0.29 x 100 is 28.999...: 29


def refusal(open_total: int, open_of_caller: int, pool: int | None,
            per_caller: int | None) -> Refusal | None:
    """Why one more stream of a caller holding ``open_of_caller`` is refused while
    ``open_total`` are open (None: it is served). ``pool`` / ``per_caller`` None: no cap."""
    if pool is not None and open_total >= pool:
        return POOL_FULL
    if per_caller is not None and open_of_caller >= per_caller:
        return CALLER_FULL
    return None


def token_name(token: bytes) -> str:
    """A bearer token as a caller's name: the head of its SHA-256, which names it in logs and
    refusals without giving it away."""
    return f"token sha256:{hashlib.sha256(token).hexdigest()[:12]}"


def peer_host(peer: str) -> str:
    """``context.peer()`` without its port: ``ipv4:10.0.0.7:53124`` -> ``ipv4:10.0.0.7``,
    ``ipv6:[::1]:53124`` -> ``ipv6:[::1]``; any other kind (``unix:...``) as it is."""
    kind, sep, address = peer.partition(":")
    if sep and kind in ("ipv4", "ipv6") and ":" in address:
        return f"{kind}:{address.rpartition(':')[0]}"
    return peer


def caller_name(token: str | None, identities: Sequence[str], peer: str) -> str:
    """Who holds a stream: its accepted token's name (``token_name``), else its client
    certificate's identities, else its address."""
    if token is not None:
        return token
    if identities:
        return f"certificate {', '.join(identities)}"
    return f"address {peer_host(peer)}"


class StreamSlots:
    """The open streams of one pool by caller: at most ``pool`` (None: no cap), of which at most
    ``per_caller`` (None: no cap) held by one caller."""

    def __init__(self, pool: int | None, per_caller: int | None) -> None:
        self.pool, self.per_caller = pool, per_caller
        self._by_caller: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, caller: str, shared: bool = True) -> Refusal | None:
        """Count one more stream of ``caller`` and return None, or return why not; a caller not
        ``shared`` (``callers.caller_shares``: an operator's credentials) has no per-caller cap."""
        with self._lock:
            held = self._by_caller.get(caller, 0)
            refused = refusal(sum(self._by_caller.values()), held, self.pool,
                              self.per_caller if shared else None)
            if refused is None:
                self._by_caller[caller] = held + 1
            return refused

    def drop(self, caller: str) -> None:
        """A stream of ``caller`` has ended (its thread left it)."""
        with self._lock:
            left = self._by_caller.get(caller, 0) - 1
            if left > 0:
                self._by_caller[caller] = left
            else:
                self._by_caller.pop(caller, None)

    def open(self) -> int:
        with self._lock:
            return sum(self._by_caller.values())

    def open_of(self, caller: str) -> int:
        with self._lock:
            return self._by_caller.get(caller, 0)
