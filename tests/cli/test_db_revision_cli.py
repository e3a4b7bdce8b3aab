"""``headroom db current`` and ``headroom db history``: what revision a store is at, against this
Headroom's head, on SQLite and PostgreSQL; read-only, with exit codes a probe can act on."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env
from sqlalchemy import create_engine, inspect, text

from controlplane.store import Store, upgrade
from controlplane.store.engine import redact, scripts

HEAD = scripts().get_current_head()


def _run(*args: str, url: str | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    env = _env(HEADROOM_DB__URL=url, **extra) if url is not None else _env(**extra)
    return subprocess.run([*WARM_HEADROOM, "db", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def _store_at(url: str, revision: str) -> None:
    store = Store.open(url)
    upgrade(store.engine, revision)
    store.engine.dispose()


def test_db_current_of_a_store_at_head_says_current_and_exits_0(store_url: str) -> None:
    _store_at(store_url, "head")
    run = _run("current", url=store_url)
    assert run.returncode == 0, run.stderr
    assert run.stdout == (f"store {redact(store_url)}: revision {HEAD}\n"
                          f"this Headroom: head {HEAD}\ncurrent\n")


def test_db_current_of_a_store_two_migrations_behind_says_so_and_exits_1(store_url: str) -> None:
    chain = [r.revision for r in scripts().walk_revisions()]  # newest first, a straight line
    two_back = chain[2]
    _store_at(store_url, two_back)
    run = _run("current", url=store_url)
    assert run.returncode == 1, run.stderr
    assert run.stdout.splitlines() == [
        f"store {redact(store_url)}: revision {two_back}", f"this Headroom: head {HEAD}",
        "behind by 2 migrations; `headroom db upgrade` applies them"]


def test_db_current_of_a_database_never_migrated_is_behind_by_every_migration(
        postgres_url: str) -> None:
    run = _run("current", url=postgres_url)
    assert run.returncode == 1, run.stderr
    every = len(list(scripts().walk_revisions()))
    assert run.stdout.splitlines()[0].endswith("revision none (never migrated)")
    assert run.stdout.splitlines()[2].startswith(f"behind by {every} migrations")
    assert inspect(create_engine(postgres_url)).get_table_names() == []  # nothing written


def test_db_current_of_a_store_a_newer_headroom_migrated_says_newer_and_exits_2(
        store_url: str) -> None:
    _store_at(store_url, "head")
    engine = create_engine(store_url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0099_future'"))
    engine.dispose()
    run = _run("current", url=store_url)
    assert run.returncode == 2
    assert run.stdout.splitlines()[2].startswith(
        "newer than this Headroom: revision '0099_future' is none of its migrations")
    assert f"`headroom db downgrade {HEAD}` first" in run.stdout


def test_db_current_of_a_missing_sqlite_file_is_one_line_and_creates_nothing(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none' / 'store.db'}"
    run = _run("current", url=url)
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: store {url}: no such database file")
    assert run.stderr.count("\n") == 1
    assert not (tmp_path / "none").exists()


def test_db_current_never_prints_the_database_password(postgres_url: str) -> None:
    _store_at(postgres_url, "head")
    run = _run("current", url=postgres_url.replace("postgres@", "postgres:s3cret@"))
    assert run.returncode == 0, run.stderr
    assert "s3cret" not in run.stdout + run.stderr


@pytest.mark.parametrize("command", ["current", "history"])
def test_a_bad_config_is_the_same_one_line_error_as_db_upgrade(tmp_path: Path,
                                                               command: str) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("db:\n  connect_timeout_s: -1\n")
    run = _run(command, "--config", str(config))
    upgrade_run = _run("upgrade", "--config", str(config))
    assert run.returncode == upgrade_run.returncode == 2
    assert run.stderr == upgrade_run.stderr
    assert run.stderr.count("\n") == 1


def test_db_history_lists_the_migrations_newest_first_marking_the_stores(store_url: str) -> None:
    _store_at(store_url, "0008")
    run = _run("history", url=store_url)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()[1:]
    revisions = [line.split()[0] for line in lines]
    assert revisions == [script.revision for script in scripts().walk_revisions()]
    assert revisions[0] == HEAD and revisions[-1] == "0001"
    assert [line for line in lines if line.endswith("<- store")] == [
        lines[revisions.index("0008")]]
    assert lines[revisions.index("0001")] == "0001  initial schema"


def test_db_current_help_documents_its_exit_codes() -> None:
    run = _run("current", "--help")
    assert run.returncode == 0
    flat = " ".join(run.stdout.replace("│", " ").split())
    assert "Exit code 0 when the store is current; 1 when it is behind" in flat
    assert "2 when the store was migrated by a newer Headroom" in flat


def test_db_commands_take_the_sqlite_file_db_names_as_status_does(tmp_path: Path) -> None:
    assert HEAD is not None
    store, elsewhere = tmp_path / "demo.db", tmp_path / "elsewhere.db"
    url = f"sqlite:///{elsewhere}"  # --db beats HEADROOM_DB__URL: this file is never made
    upgraded = _run("upgrade", "--db", str(store), url=url, COLUMNS="40")
    assert upgraded.returncode == 0, upgraded.stderr
    # whole on one line on a narrow terminal: the path is copied as it is shown
    assert f"database sqlite:///{store} upgraded to head\n" in upgraded.stderr
    current = _run("current", "--db", str(store), url=url)
    assert current.returncode == 0
    assert current.stdout.splitlines()[-1] == "current"
    history = _run("history", "--db", str(store), url=url)
    assert history.returncode == 0
    assert history.stdout.splitlines()[1].startswith(HEAD) and "<- store" in history.stdout
    previous = f"{int(HEAD) - 1:04d}"
    downgraded = _run("downgrade", previous, "--yes", "--db", str(store), url=url, COLUMNS="40")
    assert downgraded.returncode == 0, downgraded.stderr
    assert f"database sqlite:///{store} downgraded to {previous}\n" in downgraded.stderr
    behind = _run("current", "--db", str(store), url=url)
    assert behind.returncode == 1
    assert behind.stdout.startswith(f"store sqlite:///{store}: revision {previous}")
    assert not elsewhere.exists()


@pytest.mark.parametrize("name", ["q?x=1.db", "pct%41.db", "h#1.db"])
def test_a_db_path_with_url_characters_opens_the_file_named_in_every_db_command(
        tmp_path: Path, name: str) -> None:
    store = tmp_path / name
    upgraded = _run("upgrade", "--db", str(store))
    assert upgraded.returncode == 0, upgraded.stderr
    current = _run("current", "--db", str(store))  # read-only: mode=ro on the file named
    assert current.returncode == 0, current.stdout
    assert current.stdout.splitlines()[-1] == "current"
    made = {p.name.removesuffix("-wal").removesuffix("-shm") for p in tmp_path.iterdir()}
    assert made == {name}  # before: 'q', 'pctA.db' or 'h' too


@pytest.mark.parametrize("command", [["db", "current"], ["db", "history"], ["status"]])
def test_a_file_that_is_no_sqlite_database_is_named_so_not_sent_to_db_upgrade(
        tmp_path: Path, command: list[str]) -> None:
    # before: "(is the schema current? run `headroom db upgrade`)", which refuses the file too
    junk = tmp_path / "demo.db"
    junk.write_text("not a database\n" * 100)
    run = subprocess.run([*WARM_HEADROOM, *command, "--db", str(junk)], env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr == (f"error: store sqlite:///{junk}: file is not a database (not a "
                          "Headroom store, or damaged)\n")
