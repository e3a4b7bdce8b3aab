"""What a command says of a store that does not exist: where `db.url` came from, and advice that
fits it. Under the default `db.url` (`sqlite:///headroom.db`), which `headroom demo` never makes
(it keeps its own, `.headroom/demo.db`), `headroom db upgrade` makes it, or `--db
.headroom/demo.db` reads the demo's store when there is one; under a `db.url` given, the demo
with the same one makes it too."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env

#: the commands that read or add to an existing store, each as it opens one
COMMANDS = [["db", "current"], ["db", "history"], ["status"], ["models", "list"],
            ["hint", "list"], ["cost", "export", "--out", "x.csv"],
            ["trace", "export", "--out", "x.csv"], ["trace", "timeline", "--out", "x.csv"],
            ["trace", "replay", "--out-dir", "r"]]


def _headroom(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, *args], cwd=cwd, env=_env(COLUMNS="400", **env),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_missing_default_store_beside_a_demo_store_says_to_pass_the_demos_store(
        tmp_path: Path, command: list[str]) -> None:
    demo_store = tmp_path / ".headroom" / "demo.db"
    demo_store.parent.mkdir()
    sqlite3.connect(demo_store).close()
    run = _headroom(tmp_path, *command)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == ("error: store sqlite:///headroom.db: no such database file (db.url "
                          "from the default); `headroom demo` keeps its store in "
                          ".headroom/demo.db: pass --db .headroom/demo.db\n")
    assert not (tmp_path / "headroom.db").exists()


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_missing_default_store_says_db_upgrade_makes_it_and_not_the_demo(
        tmp_path: Path, command: list[str]) -> None:
    run = _headroom(tmp_path, *command)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == ("error: store sqlite:///headroom.db: no such database file (db.url "
                          "from the default); run `headroom db upgrade` to create it\n")
    assert not (tmp_path / "headroom.db").exists()


def test_a_missing_store_named_by_db_says_the_demo_with_the_same_db_url_makes_it_too(
        tmp_path: Path) -> None:
    run = _headroom(tmp_path, "db", "current", "--db", "new.db")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == (f"error: store sqlite:///{tmp_path / 'new.db'}: no such database file "
                          "(db.url from the command line); run `headroom db upgrade` to create "
                          "it (or start `headroom demo` with the same db.url)\n")
    assert not (tmp_path / "new.db").exists()
