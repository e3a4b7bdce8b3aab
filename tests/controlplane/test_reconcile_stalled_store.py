"""The serve loop on a PostgreSQL store whose network stalls while a tick saves its report: the
save fails within db.response_timeout_s instead of holding the loop's thread for ever, the tick
counts as unsaved, and once the network answers again the next tick saves both reports."""

from __future__ import annotations

import threading
import time
from contextlib import closing
from datetime import UTC, datetime

import pytest

from controlplane.domain.tick import TickReport
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from tests.stallproxy import StallProxy

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@pytest.mark.postgres
def test_a_tick_whose_save_stalls_is_unsaved_within_the_response_timeout_and_saved_later(
        postgres_url: str) -> None:
    with closing(StallProxy(("127.0.0.1", 5432))) as proxy:
        url = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
        settings = load_settings(db={"url": url, "connect_timeout_s": 2,
                                     "response_timeout_s": 2}, sim={"history_s": 3600})
        store = Store.open(url, 2, migrate=True, response_timeout_s=2)
        try:
            runtime = SimRuntime.open(settings, store, T0)
            runtime.advance(60)
            ticks_before = store.counts()["ticks"]
            seen: list[tuple[TickReport, bool]] = []
            runtime.on_tick = lambda report, saved: seen.append((report, saved))
            proxy.stall_on(b"INSERT INTO ticks")
            runtime.clock.advance(30)
            ticked = threading.Thread(target=runtime.tick, daemon=True)
            ticked.start()
            ticked.join(30)  # the test's own bound: a hang fails it instead of hanging it
            assert not ticked.is_alive(), "the tick still waits on the stalled store after 30 s"
            assert proxy.stalled_at is not None
            assert time.monotonic() - proxy.stalled_at < 2 + 1.5
            assert [saved for _, saved in seen] == [False]
            proxy.resume()
            runtime.clock.advance(30)
            runtime.tick()
            assert [saved for _, saved in seen] == [False, True]
            assert store.counts()["ticks"] == ticks_before + 2
        finally:
            store.engine.dispose()
