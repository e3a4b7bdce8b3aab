"""The Overview names the replica that wrote the newest tick (its Lease holder identity under
`headroom serve --backend kubernetes`) and, when another replica wrote ticks before it, when
leadership changed, as `headroom status` does, and a newer tick that saved only its guard
intent; names are shown as written."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from dashboard_support import Seeded, as_shown, open_page, seed_store
from sqlalchemy import select, update
from sqlmodel import SQLModel

from controlplane.domain.guards import GuardMemory
from controlplane.store.engine import make_engine
from controlplane.store.tables import TickRecord
from dashboard.markdown import escape_markdown

TICKS = SQLModel.metadata.tables[str(TickRecord.__tablename__)]
#: Lease holder identities whose underscores markdown would read as emphasis
LEADER_A, LEADER_B = "headroom_7c9d_a", "headroom_7c9d_b"


def _captions(url: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The Overview's captions as markdown source."""
    return [c.value for c in open_page(url, "views/overview.py", monkeypatch).caption]


def test_overview_names_the_newest_writer_and_when_leadership_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'takeover.db'}"
    seed_store(url, 0.25)
    engine = make_engine(url)
    with engine.begin() as connection:
        ticks = connection.execute(select(TICKS.c.id, TICKS.c.started_at)
                                   .order_by(TICKS.c.id)).all()
        (last_of_a, a_at), (first_of_b, b_at) = ticks[len(ticks) // 2 - 1: len(ticks) // 2 + 1]
        connection.execute(update(TICKS).where(TICKS.c.id <= last_of_a).values(writer=LEADER_A))
        connection.execute(update(TICKS).where(TICKS.c.id >= first_of_b).values(writer=LEADER_B))
    engine.dispose()
    captions = _captions(url, monkeypatch)
    assert f"Newest tick written by {escape_markdown(LEADER_B)}" in captions  # not emphasis
    (change,) = [as_shown(c) for c in captions if c.startswith("Leadership changed")]
    assert change.startswith(f"Leadership changed at {b_at:%Y-%m-%d %H:%M:%S} UTC "
                             f"(tick #{first_of_b}, ")
    assert change.endswith(f"): {LEADER_A} → {LEADER_B}; {LEADER_A}'s last tick was at "
                           f"{a_at:%Y-%m-%d %H:%M:%S} UTC")


def test_overview_shows_no_leadership_change_when_ticks_do_not_name_their_writer(
        seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    captions = _captions(seeded.url, monkeypatch)
    assert ("Newest tick written by unknown (recorded before Headroom named writers)"
            in captions)
    assert not [c for c in captions if c.startswith("Leadership")]
    assert not [c for c in captions if c.startswith("Unrecorded tick")]  # each tick saved


def test_overview_names_a_tick_that_saved_its_intent_and_no_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    runtime = seed_store(url, 0.25)
    killed_at = runtime.clock.now() + timedelta(seconds=30)
    runtime.store.save_intent(killed_at, GuardMemory(), writer=LEADER_B)
    runtime.store.engine.dispose()
    (line,) = [as_shown(c) for c in _captions(url, monkeypatch)
               if c.startswith("Unrecorded tick")]
    assert line.startswith(f"Unrecorded tick: started at {killed_at:%Y-%m-%d %H:%M:%S} UTC (")
    assert f"by {LEADER_B}, no record saved yet (in progress, or killed after it may " in line
