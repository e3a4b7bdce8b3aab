"""Commands that read or add to a store a newer Headroom migrated (a revision this one has no
migration for): one line naming the revision and what to run, nothing read or written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env, _free_port
from sqlalchemy import create_engine, text

from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store
from controlplane.store.engine import scripts

FUTURE = "0099_future"
HEAD = scripts().get_current_head()  # this Headroom's newest migration


def newer_store(url: str) -> None:
    """A store at head with the demo's models, then stamped with a revision from the future."""
    store = Store.open(url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    store.engine.dispose()
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE alembic_version SET version_num = '{FUTURE}'"))
    engine.dispose()


def stored(url: str) -> tuple[str, int]:
    engine = create_engine(url)
    with engine.connect() as connection:
        revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
        hints = connection.execute(text("SELECT count(*) FROM demand_hints")).scalar()
    engine.dispose()
    return str(revision), int(hints or 0)


@pytest.mark.parametrize("command", [
    ["status"],
    ["dashboard", "--port", str(_free_port())],
    ["hint", "add", DEMO_MODELS[0].name, "--rps", "5", "--end", "2030-01-01T00:00"],
])
def test_a_command_on_a_store_migrated_by_a_newer_headroom_names_its_revision_and_writes_nothing(
        tmp_path: Path, command: list[str], store_url: str) -> None:
    newer_store(store_url)
    run = subprocess.run([*WARM_HEADROOM, *command], env=_env(HEADROOM_DB__URL=store_url),
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.endswith(
        f"is at revision '{FUTURE}', which this Headroom does not know: a newer Headroom "
        f"migrated it; run that version, or its `headroom db downgrade {HEAD}` first\n"), \
        run.stderr
    assert run.stderr.count("\n") == 1
    assert stored(store_url) == (FUTURE, 0)
