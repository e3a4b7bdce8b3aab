"""`headroom status` shows the newest fencing token of the leader's store writes (migration
0018): which replica's term is accepted now, so an operator can tell it from a deposed
leader whose late saves are refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from clihelpers import headroom_status
from test_status_leadership_cli import _document, _filled, _iso

from controlplane.adapters.clock import WallClock
from controlplane.domain.errors import Fenced
from controlplane.domain.guards import GuardMemory
from controlplane.store import Store


def test_status_shows_the_newest_fencing_token_and_the_replica_that_claimed_it(
        store_url: str) -> None:
    _filled(store_url, ["headroom-a"])
    assert _document(store_url)["fence"] is None  # no term claimed one yet
    store = Store.open(store_url)
    now = WallClock().now()
    old = store.claim_fence("headroom-a", now - timedelta(minutes=5))
    taken_at = now - timedelta(seconds=30)
    store.claim_fence("headroom-b", taken_at)
    with pytest.raises(Fenced):  # the deposed replica's late save, as status then explains
        store.save_intent(now, GuardMemory(), writer="headroom-a", fence=old)
    store.engine.dispose()
    doc = _document(store_url)
    assert doc["fence"]["token"] == 2 and doc["fence"]["holder"] == "headroom-b"
    assert doc["fence"]["claimed_at"] == _iso(taken_at)
    assert 30 <= doc["fence"]["claimed_age_s"] < 120
    assert doc["healthy"] is True  # informational
    run = headroom_status(store_url)
    assert run.returncode == 0, run.stdout + run.stderr
    line = next(x for x in run.stdout.splitlines() if x.startswith("write fence"))
    assert f"token 2, claimed by headroom-b at {_iso(taken_at)}" in line, run.stdout
    assert "older token are refused" in line, run.stdout
