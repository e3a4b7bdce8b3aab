"""Fixtures of the placement server tests."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.server import create_server, stop


@pytest.fixture
def stub() -> Iterator[pb_grpc.PlacementStub]:
    """A stub of a fresh placement server on 127.0.0.1 (port 0), stopped afterwards."""
    yield from served_stub()


def served_stub() -> Iterator[pb_grpc.PlacementStub]:
    """``stub``'s server and channel, for a fixture of another scope to yield from."""
    server, port = create_server("127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.PlacementStub(channel)
    finally:
        channel.close()
        stop(server, grace_s=1.0)
