"""The node-layout half of the backend contract (the simulator and the Kubernetes adapters alike):
device-plugin sharing and MIG re-layouts are absolute, idempotent targets (a sharing change may
first be pending, retryable, while its config propagates); an unknown node or an
impossible geometry is refused for good; a second target while one runs waits."""

from __future__ import annotations

from contract_harness import Harness

from controlplane.domain.mig_layout import uniform
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import SharingLayout

MPS4 = SharingLayout(SharingMode.MPS, 4)
SEVEN = uniform("A100-80GB", ("1g.10gb",) * 7)


def test_an_unknown_node_is_refused_for_sharing_and_relayout_without_retry(
        harness: Harness) -> None:
    for outcome in (harness.sharing.apply_sharing("no-such-node", MPS4),
                    harness.mig.start_relayout("no-such-node", SEVEN, "contract")):
        assert not outcome.ok and not outcome.retryable
    assert "no-such-node" not in harness.mig.in_flight()


def test_an_impossible_mig_geometry_is_refused_naming_it(harness: Harness) -> None:
    bad = uniform("A100-80GB", ("7g.80gb", "1g.10gb"))
    outcome = harness.mig.start_relayout("no-such-node", bad, "contract")
    assert not outcome.ok and not outcome.retryable and "geometry" in outcome.message


def test_sharing_is_an_absolute_idempotent_target_the_reader_reports(
        gpu_harness: Harness) -> None:
    assert gpu_harness.gpu_node is not None
    written = gpu_harness.sharing.apply_sharing(gpu_harness.gpu_node, MPS4)
    if not written.ok:  # a new config first propagates to the device plugin: not done yet
        assert written.retryable and written.message.startswith("config_propagating: ")
        gpu_harness.settle()
    first = gpu_harness.sharing.apply_sharing(gpu_harness.gpu_node, MPS4)
    second = gpu_harness.sharing.apply_sharing(gpu_harness.gpu_node, MPS4)
    assert first.ok and second.ok, (first.message, second.message)
    node = next(n for n in gpu_harness.reader.snapshot().nodes
                if n.name == gpu_harness.gpu_node)
    assert {(g.sharing, g.sharing_replicas) for g in node.gpus} == {("mps", 4)}


def test_a_relayout_is_in_flight_once_and_another_target_waits(gpu_harness: Harness) -> None:
    node = gpu_harness.gpu_node
    assert node is not None
    assert gpu_harness.mig.start_relayout(node, SEVEN, "contract").ok
    assert gpu_harness.mig.in_flight() == {node: SEVEN}
    assert gpu_harness.mig.start_relayout(node, SEVEN, "again").ok
    other = gpu_harness.mig.start_relayout(node, uniform("A100-80GB", ("7g.80gb",)), "other")
    assert not other.ok and other.retryable
    assert gpu_harness.mig.in_flight() == {node: SEVEN}
