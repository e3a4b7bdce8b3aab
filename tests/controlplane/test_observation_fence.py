"""A leader's observations (and the inventory each tick replaces) are saved under its term's
fencing token, as its tick records are (``store/tick_fence.py``): a deposed leader's late save
is refused whole, so its stale rows never join the new leader's history."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlmodel import col, select
from test_tick_fence import Term
from tick_builders import T0, sample_tick_report

from controlplane.decision_retry import RetryingDecisionStore
from controlplane.domain.errors import Fenced
from controlplane.domain.observed import ObservedGpu, ObservedNode, ObservedState
from controlplane.store import Store
from controlplane.store.tables import NodeRecord, ObservationRecord


def _observed(seconds: int, node: str, demand_rps: float) -> ObservedState:
    """The sample tick's snapshot at T0 + ``seconds``: one node ``node``, bert-embed's load at
    ``demand_rps``."""
    observed = sample_tick_report().observed
    (bert,) = observed.models
    return replace(observed, synced_at=T0 + timedelta(seconds=seconds),
                   models=(replace(bert, demand_rps=demand_rps),),
                   nodes=(ObservedNode(node, "l4", "L4", True, 8000, 64_000,
                                       (ObservedGpu(0, "L4", 23_034, False, (), "exclusive"),)),))


def _observations(store: Store) -> list[tuple[str, float]]:
    with store.session() as session:
        rows = session.exec(select(ObservationRecord.model, ObservationRecord.demand_rps)
                            .order_by(col(ObservationRecord.id))).all()
    return [(model, rps) for model, rps in rows]


def _nodes(store: Store) -> list[str]:
    with store.session() as session:
        return list(session.exec(select(NodeRecord.name)).all())


def test_an_observation_saved_under_an_older_token_after_a_newer_claim_is_refused_whole(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    old, new = store.claim_fence("replica-a", T0), store.claim_fence("replica-b", T0)
    store.save_observed(_observed(30, "node-new", 7.0), fence=new)
    with pytest.raises(Fenced) as refused:
        store.save_observed(_observed(0, "node-old", 5.0), fence=old)
    assert (refused.value.token, refused.value.newest, refused.value.holder) == (
        1, 2, "replica-b")
    with pytest.raises(Fenced):
        store.save_observations([("bert-embed", T0, 5.0)], fence=old)
    assert _observations(store) == [("bert-embed", 7.0)]  # none of the old leader's rows
    assert _nodes(store) == ["node-new"]  # nor its inventory
    store.engine.dispose()


def test_observations_under_the_newest_token_or_unfenced_are_saved(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    store.claim_fence("replica-a", T0)
    newest = store.claim_fence("replica-b", T0)
    store.save_observed(_observed(0, "node-b", 7.0), fence=newest)
    store.save_observations([("bert-embed", T0 + timedelta(seconds=30), 8.0)], fence=newest)
    store.save_observed(_observed(60, "node-c", 9.0))  # unfenced: a dry run, the demo, tests
    store.save_observations([("bert-embed", T0 + timedelta(seconds=90), 10.0)])
    assert _observations(store) == [("bert-embed", 7.0), ("bert-embed", 8.0),
                                    ("bert-embed", 9.0), ("bert-embed", 10.0)]
    assert _nodes(store) == ["node-c"]
    store.engine.dispose()


def test_a_deposed_leaders_observation_is_refused_under_its_terms_token(sqlite_url: str) -> None:
    store = Store.open(sqlite_url, migrate=True)
    old = RetryingDecisionStore(store, writer="replica-a", term=Term(1))
    new = RetryingDecisionStore(store, writer="replica-b", term=Term(1))
    old.save_observed(_observed(0, "node-a", 5.0))  # claims token 1
    new.save_observed(_observed(60, "node-b", 7.0))  # took the Lease over: claims token 2
    with pytest.raises(Fenced):
        old.save_observed(_observed(30, "node-a", 6.0))  # stalled since before the take-over
    assert _observations(store) == [("bert-embed", 5.0), ("bert-embed", 7.0)]
    assert _nodes(store) == ["node-b"]
    RetryingDecisionStore(store, writer="dry-run", term=Term(None)).save_observed(
        _observed(90, "node-d", 8.0))  # no term, no token: unfenced
    assert _observations(store)[-1] == ("bert-embed", 8.0)
    store.engine.dispose()
