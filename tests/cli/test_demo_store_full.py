"""`headroom demo` whose store fills up mid-run (a full disk, simulated by SQLite's
``max_page_count``: the same ``database or disk is full`` error) stops on one line naming the
store, exits 2 as for a store it could not open, gives its fleet lease up and leaves the store
intact."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from clihelpers import _env, only_failure_document

#: pages a demo store has once started (about 1,110, backfilled history included, since
#: migration 0025's wider observations index); the run adds about 7 a simulated minute, so it
#: fills up within its first quarter hour
FULL_AT_PAGES = 1170

#: `headroom` with every SQLite connection of the store capped at FULL_AT_PAGES
CAPPED_HEADROOM = [sys.executable, "-c", (
    "import controlplane.store.engine as engine\n"
    "pragmas = engine._sqlite_pragmas\n"
    "def capped(connection, record):\n"
    "    pragmas(connection, record)\n"
    f"    connection.execute('PRAGMA max_page_count={FULL_AT_PAGES}')\n"
    "engine._sqlite_pragmas = capped\n"
    "from controlplane.cli import main\n"
    "main()\n")]


def test_a_demo_whose_store_fills_up_stops_on_one_line_exit_2_and_gives_the_lease_up(
        tmp_path: Path) -> None:
    db = tmp_path / "full.db"
    done = subprocess.run([*CAPPED_HEADROOM, "demo", "--minutes", "600", "--no-dashboard",
                           "--json", "--db", str(db), "--start", "2026-12-03T08:00:00Z"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"error: store sqlite:///{db}: database or disk is full "
                           "(db.url from the command line)\n")
    assert only_failure_document(done)
    with contextlib.closing(sqlite3.connect(db)) as store:
        assert store.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        holder, = store.execute("SELECT holder FROM leases WHERE name = 'sim-fleet'").fetchone()
        ticks, = store.execute("SELECT count(*) FROM ticks").fetchone()
    assert holder == ""  # released: the next demo need not wait for it to run out
    assert ticks > 0  # it failed mid-run, not while starting
