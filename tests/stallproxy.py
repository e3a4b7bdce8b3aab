"""A TCP proxy on 127.0.0.1 that forwards to a real server until told to stall: then it stops
forwarding in both directions and keeps every socket open, as a partitioned network or a dead
load balancer does (the client's kernel still sees the connection; no byte, no reset, no FIN).

``stall()`` stalls at once; ``stall_on(b"...")`` stalls when the client sends those bytes, which
are then held back (a stall in the middle of a known statement); ``resume()`` forwards again."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time


class StallProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.stalled = threading.Event()
        self.stalled_at: float | None = None  # time.monotonic() of the stall
        self.trigger: bytes | None = None
        self.held: list[socket.socket] = []
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        self.stalled_at = time.monotonic()
        self.stalled.set()

    def resume(self) -> None:
        """Forward again (the connections accepted while stalled stay unanswered)."""
        self.trigger = None
        self.stalled.clear()

    def stall_on(self, marker: bytes) -> None:
        self.trigger = marker

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.held.append(client)
            if self.stalled.is_set():  # a new connection is accepted and never forwarded
                continue
            server = socket.create_connection(self.upstream)
            self.held.append(server)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False),
                             daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        while not self.closed.is_set():
            if self.stalled.is_set():
                self.closed.wait(0.05)
                continue
            try:
                readable, _, _ = select.select([source], [], [], 0.05)
                if not readable or self.stalled.is_set():
                    continue
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if from_client and self.trigger is not None and self.trigger in data:
                self.stall()  # the bytes that carried the marker are never forwarded
                continue
            try:
                target.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.closed.set()
        for sock in [self.listener, *self.held]:
            with contextlib.suppress(OSError):
                sock.close()
