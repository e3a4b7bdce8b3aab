"""One behavioural contract for every cluster backend (simulator, Kubernetes adapters against the
API test server, and a real cluster with ``-m k8s``): snapshots, absolute idempotent targets,
unknown targets."""

from __future__ import annotations

from contract_harness import Harness


def test_a_snapshot_is_synced_and_lists_the_known_pool_and_model(harness: Harness) -> None:
    observed = harness.reader.snapshot()
    assert observed.synced
    offset = observed.synced_at.utcoffset()
    assert offset is not None and offset.total_seconds() == 0
    assert observed.pool(harness.pool) is not None
    assert observed.model(harness.model) is not None


def test_set_replicas_is_absolute_and_idempotent(harness: Harness) -> None:
    first = harness.replicas.set_replicas(harness.model, 3)
    second = harness.replicas.set_replicas(harness.model, 3)
    assert first.ok and second.ok and first.target == harness.model
    model = harness.reader.snapshot().model(harness.model)
    assert model is not None and model.replicas_target == 3


def test_set_replicas_down_to_zero_is_absolute(harness: Harness) -> None:
    assert harness.replicas.set_replicas(harness.model, 2).ok
    assert harness.replicas.set_replicas(harness.model, 0).ok
    model = harness.reader.snapshot().model(harness.model)
    assert model is not None and model.replicas_target == 0


def test_an_unknown_model_is_a_failure_that_is_not_retried(harness: Harness) -> None:
    outcome = harness.replicas.set_replicas("no-such-model", 2)
    assert not outcome.ok and not outcome.retryable and "no-such-model" in outcome.message


def test_set_size_is_absolute_and_idempotent(harness: Harness) -> None:
    for nodes in (3, 3, 1):
        outcome = harness.node_pools.set_size(harness.pool, nodes)
        assert outcome.ok, outcome.message
        pool = harness.reader.snapshot().pool(harness.pool)
        assert pool is not None and pool.target_nodes == nodes


def test_an_unknown_pool_is_a_failure_that_is_not_retried(harness: Harness) -> None:
    outcome = harness.node_pools.set_size("no-such-pool", 2)
    assert not outcome.ok and not outcome.retryable and "no-such-pool" in outcome.message


def test_a_negative_size_is_refused(harness: Harness) -> None:
    before = harness.reader.snapshot().pool(harness.pool)
    outcome = harness.node_pools.set_size(harness.pool, -1)
    after = harness.reader.snapshot().pool(harness.pool)
    assert not outcome.ok and not outcome.retryable
    assert before is not None and after is not None and after.target_nodes == before.target_nodes
