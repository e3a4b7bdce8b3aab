"""The lock two migrators of one PostgreSQL store take in turn, waited for a bounded time.

Two processes that migrate at once (the two `headroom serve` replicas of deploy/ starting on a
new database) go one after the other: each migration's transaction first takes a
transaction-scoped advisory lock, so the second reads the version the first committed and has
nothing to do. The second polls for the lock (``pg_try_advisory_xact_lock``) rather than
blocking on it: a migrator that hangs or runs long would otherwise keep every other one waiting
without bound (or until db.response_timeout_s cut the wait with a misleading "no answer").
Past ``db.migration_lock_wait_s`` it gives up before it has changed anything."""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Connection

MIGRATION_LOCK_KEY = 0x4845414452  # PostgreSQL advisory lock of Headroom's migrations ("HEADR")

#: db.migration_lock_wait_s's default (DbSettings, which imports no database library, repeats
#: it; a test checks the two agree): longer than any migration Headroom ships takes
DEFAULT_MIGRATION_LOCK_WAIT_S = 300.0

#: seconds between two tries for the lock
LOCK_POLL_S = 0.25


class MigrationLockHeld(Exception):
    """Another migration held the store's migration lock for all of ``wait_s``."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(f"another migration holds the store's migration lock (PostgreSQL "
                         f"advisory lock {MIGRATION_LOCK_KEY:#x}); gave up after {wait_s:g} s; "
                         "raise db.migration_lock_wait_s to wait longer")
        self.wait_s = wait_s


def take_migration_lock(connection: Connection, wait_s: float,
                        clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep) -> None:
    """Take the advisory lock in ``connection``'s transaction (released when it ends), trying
    every ``LOCK_POLL_S`` for up to ``wait_s``; MigrationLockHeld past that."""
    deadline_at = clock() + wait_s
    while not connection.exec_driver_sql(
            f"SELECT pg_try_advisory_xact_lock({MIGRATION_LOCK_KEY})").scalar():
        remaining_s = deadline_at - clock()
        if remaining_s <= 0:
            raise MigrationLockHeld(wait_s)
        sleep(min(LOCK_POLL_S, remaining_s))
