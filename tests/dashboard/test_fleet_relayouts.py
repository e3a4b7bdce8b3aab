"""The Fleet page lists the MIG re-layouts in flight and says in full what each waits on (as
`headroom status` does), e.g. a user's GPU DaemonSet pod the drain leaves on the node, rendered
by Streamlit's AppTest over a copy of a store the real core filled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dashboard_support import Seeded, as_shown, copy_store, open_page
from sqlalchemy import insert

from controlplane.cost_reader import table
from controlplane.domain.relayout_gpu_pods import gpu_daemon_pods
from controlplane.store.engine import make_engine

HELD = gpu_daemon_pods(["monitoring/dcgm-exporter-x7k2p"])


def _with_a_relayout_waiting(seeded: Seeded, tmp_path: Path) -> str:
    url = copy_store(seeded.url, tmp_path / "relayout.db")
    started_at = datetime(2026, 3, 3, 0, 20, tzinfo=UTC)
    engine = make_engine(url)
    with engine.begin() as connection:
        connection.execute(insert(table("mig_relayouts")).values(
            relayout_id="a100-node-3/1", node="a100-node-3", pool="a100-80gb",
            product="A100-80GB", from_config="all-disabled", to_config="all-3g.40gb",
            to_layout_json="{}", phase="draining", active=True, started_at=started_at,
            updated_at=started_at, deadline_at=started_at + timedelta(minutes=30),
            wait_reason=HELD, alert="", reason="mig_layout"))
    engine.dispose()
    return url


def test_the_fleet_page_lists_a_relayout_in_flight_and_warns_with_what_it_waits_on_in_full(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(_with_a_relayout_waiting(seeded, tmp_path), "views/fleet.py", monkeypatch)
    (relayouts,) = [d.value for d in at.dataframe if "waiting on" in d.value.columns]
    assert relayouts[["node", "from", "to", "phase"]].values.tolist() == [
        ["a100-node-3", "all-disabled", "all-3g.40gb", "draining"]]
    assert relayouts["waiting on"].tolist() == [HELD]
    (warning,) = [as_shown(w.value) for w in at.warning if w.value.startswith("Re-layout")]
    assert warning == ("Re-layout of node a100-node-3 (all-disabled → all-3g.40gb, draining) "
                       f"waits: {HELD}")


def test_the_fleet_page_says_no_relayout_is_in_flight_when_none_is(
        seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(seeded.url, "views/fleet.py", monkeypatch)
    assert "No MIG re-layout in flight." in [c.value for c in at.caption]
    assert not [d for d in at.dataframe if "waiting on" in d.value.columns]
