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

from controlplane.store.pg_response import DEFAULT_RESPONSE_TIMEOUT_S

MIGRATION_LOCK_KEY = 0x4845414452  # PostgreSQL advisory lock of Headroom's migrations ("HEADR")

#: db.migration_lock_wait_s's default (DbSettings, which imports no database library, repeats
#: it; a test checks the two agree): longer than any migration Headroom ships takes
DEFAULT_MIGRATION_LOCK_WAIT_S = 300.0

#: seconds between two tries for the lock
LOCK_POLL_S = 0.25


#: the share of db.response_timeout_s a migration waits for a table lock: the lock wait fails on
#: the server (lock_timeout), the statement with it, before the client gives up on the answer
TABLE_LOCK_WAIT_SHARE = 0.5


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


def bound_table_lock_waits(connection: Connection) -> None:
    """Bound, for the rest of ``connection``'s transaction, each wait for a table lock
    (PostgreSQL lock_timeout) to ``TABLE_LOCK_WAIT_SHARE`` of the connection's response timeout.

    A migration's ALTER waits behind any session reading the table (a backup, a transaction
    left open), and every later read or write of the table queues behind the ALTER: unbounded,
    the store stops for as long as that session lasts. Past the bound the statement fails on
    the server (SQLSTATE 55P03), the migration rolls back whole and its locks go at once; were
    the bound the client's response timeout, the ALTER would be left queued on the server
    after the client gave up."""
    dbapi = connection.connection.dbapi_connection
    response_timeout_s = getattr(dbapi, "response_timeout_s", DEFAULT_RESPONSE_TIMEOUT_S)
    wait_ms = max(1, int(response_timeout_s * TABLE_LOCK_WAIT_SHARE * 1000))
    connection.exec_driver_sql(f"SET LOCAL lock_timeout = {wait_ms}")
