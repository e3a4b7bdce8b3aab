"""How large a message the placement API's gRPC server receives and sends.

The receive cap bounds what any caller, before or after authentication, can make the server
hold for one call (gRPC refuses a larger request RESOURCE_EXHAUSTED from its length prefix,
before reading it); a call without valid credentials is refused before its request is read at
all (``scheduler.callers``). The largest legitimate requests, serialized (measured with
``placement_pb2``):

- SyncInventory of 2,000 nodes x 8 A100-80GB GPUs x 7 MIG instances (1g.10gb, with start and
  model): 7.3 MiB with 30 labels per node, 20.6 MiB with 150 (node-feature-discovery's CPU
  labels), 37.2 MiB with 300;
- RankReplicas of its 10,000 replicas with 100 LoRA adapters each: 28.2 MiB;
- PlanFleet of 2,000 models x 32 profile points: 2.3 MiB; RenewLeases of 100,000 ids: 3.0 MiB.
"""

from __future__ import annotations

#: The default receive cap: over twice the largest request above with a usual label set.
DEFAULT_MAX_REQUEST_MIB = 64
#: gRPC's limit is a C int of bytes.
MAX_REQUEST_MIB_LIMIT = 2047
#: What the server sends at most: a FleetPlan or ListBindings of a large fleet (a reply is the
#: server's own, so its size is not a caller's to choose).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


def mib_to_bytes(mib: int) -> int:
    """``mib`` MiB in bytes."""
    return mib * 1024 * 1024
