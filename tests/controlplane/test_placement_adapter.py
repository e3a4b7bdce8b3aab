"""The control plane's PlanFleet request: pools as large as an operator configures them stay
within what the placement API accepts."""

from __future__ import annotations

from controlplane.adapters.placement import plan_request
from controlplane.domain.desired import PoolSpec
from scheduler.convert import fleet_request_from_pb
from scheduler.domain.validate import MAX_POOL_GPUS, validate_fleet_request


def test_a_pool_larger_than_the_api_accepts_is_offered_at_the_api_limit() -> None:
    pools = (PoolSpec("big", "A100-80GB", 8, 0, 50_000, 4.0),
             PoolSpec("small", "L4", 4, 0, 8, 0.8))
    request = plan_request((), (), pools)
    assert [p.max_gpus for p in request.pools] == [MAX_POOL_GPUS, 32]
    validate_fleet_request(fleet_request_from_pb(request))  # raises on a malformed request
