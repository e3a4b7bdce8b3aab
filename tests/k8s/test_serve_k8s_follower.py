"""A follower's tick against the API test server: it refreshes the placement inventory, and an
API error (unreachable, forbidden) is one logged line, never an exception out of the tick."""

from __future__ import annotations

import logging

import pytest
from apiserver import ApiServer
from k8s_builders import gpu_node
from k8s_harness import make_backend

from controlplane.domain.observed import ObservedState
from controlplane.serve_k8s import follow
from controlplane.sim.clock import VirtualClock


class RecordingPlacement:
    def __init__(self) -> None:
        self.synced: list[ObservedState] = []

    def sync_inventory(self, observed: ObservedState) -> None:
        self.synced.append(observed)


def test_a_follower_tick_syncs_the_placement_inventory(apiserver: ApiServer,
                                                       clock: VirtualClock) -> None:
    apiserver.seed(gpu_node("l4-1", product="NVIDIA-L4", gpus=4, nodepool="l4"))
    placement = RecordingPlacement()
    assert follow(make_backend(apiserver, clock).reader, placement)  # type: ignore[arg-type]
    assert [n.name for n in placement.synced[0].nodes] == ["l4-1"]


@pytest.mark.parametrize(("code", "level"), [(503, "WARNING"), (403, "ERROR")])
def test_a_follower_that_cannot_read_the_fleet_logs_one_line_and_keeps_its_inventory(
        apiserver: ApiServer, clock: VirtualClock, caplog: pytest.LogCaptureFixture,
        code: int, level: str) -> None:
    reader = make_backend(apiserver, clock).reader
    placement = RecordingPlacement()
    apiserver.inject_fault("GET", "/api/v1/nodes", code, times=5)
    with caplog.at_level(logging.INFO, logger="headroom.serve"):
        assert not follow(reader, placement)  # type: ignore[arg-type]
    assert placement.synced == []
    records = [r for r in caplog.records if r.name == "headroom.serve"]
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in records] == [
        (level, "tick.follower_unobserved", None)]
    assert records[0].__dict__["error"].startswith(f"HTTP {code}: ")
