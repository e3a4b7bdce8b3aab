"""Shared fixtures: store URLs for SQLite and the PostgreSQL server on 127.0.0.1:5432."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

#: where the fresh test databases are created from (a helper sharing the server names its own)
PG_ADMIN_URL = os.environ.get("HEADROOM_TEST_PG_ADMIN_URL",
                              "postgresql+psycopg://postgres@127.0.0.1:5432/test")


#: whether the repository's .headroom folder (the demo store, fitted forecaster state) existed
#: before the run: a test run must not create it (each test keeps its files in its tmp_path)
_HEADROOM_DIR_BEFORE = pytest.StashKey[bool]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_HEADROOM_DIR_BEFORE] = (session.config.rootpath / ".headroom").exists()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    made = session.config.rootpath / ".headroom"
    if hasattr(session.config, "workerinput") or session.config.stash.get(
            _HEADROOM_DIR_BEFORE, True) or not made.exists():
        return
    print(f"\nerror: the tests created {made} (a fixture or test wrote the demo store or the "
          "forecaster state into the working directory, not its tmp_path)")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session", autouse=True)
def _warm_cli() -> Iterator[None]:
    """One warm interpreter per pytest process that ``WARM_HEADROOM`` commands fork from
    (tests/warm_cli.py). Its environment is the run's without HEADROOM_* settings and terminal
    size, which each command brings in its own."""
    from tests.warm_cli import SOCKET_VARIABLE
    directory = tempfile.mkdtemp(prefix="warm-cli-")
    path = str(Path(directory) / "socket")
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HEADROOM_") and k not in ("COLUMNS", "LINES")}
    with (Path(directory) / "server.log").open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {root!r}); "
             f"from tests.warm_cli import serve; sys.path.remove({root!r}); serve({path!r})"],
            stdin=subprocess.PIPE, stdout=log, stderr=log, env=env, cwd=directory)
    os.environ[SOCKET_VARIABLE] = path
    for _ in range(600):  # ready once it listens, after its imports: ~1-3 s
        if Path(path).exists() or server.poll() is not None:
            break
        time.sleep(0.1)
    try:
        yield
    finally:
        del os.environ[SOCKET_VARIABLE]
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(autouse=True)
def _forecaster_state_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forecast refreshes of serve and demo keep fitted state (forecast.state_dir, relative
    to the working directory by default): in tests, each test's own directory."""
    monkeypatch.setenv("HEADROOM_FORECAST__STATE_DIR", str(tmp_path / "forecaster-state"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'headroom.db'}"


def fresh_postgres_database() -> Iterator[str]:
    """A fresh database on the local PostgreSQL server, dropped afterwards."""
    name = f"headroom_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    yield from fresh_postgres_database()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'headroom.db'}"
    else:
        yield from fresh_postgres_database()
