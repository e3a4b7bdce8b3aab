"""A database password given in db.url's query (``?password=``, as libpq takes it) is never
printed: `headroom status` names the store, and an unreachable one, and `headroom demo --json`
its summary's db_url, with its value as ***."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from clihelpers import WARM_HEADROOM, _env

from controlplane.store import Store

SECRET = "QuerySecret77"


def test_status_names_a_store_whose_password_is_a_query_parameter_without_the_password(
        postgres_url: str) -> None:
    Store.open(postgres_url, migrate=True).engine.dispose()
    url = f"{postgres_url}?password={SECRET}&sslmode=disable"  # trust auth ignores it
    for args in ((), ("--json",)):
        run = subprocess.run([*WARM_HEADROOM, "status", *args], env=_env(HEADROOM_DB__URL=url),
                             capture_output=True, text=True, timeout=120)
        assert "Traceback" not in run.stderr, run.stderr
        assert SECRET not in run.stdout + run.stderr
    assert json.loads(run.stdout)["store"] == f"{postgres_url}?password=***&sslmode=disable"


def test_an_unreachable_store_is_named_without_the_password_of_its_query(
        postgres_url: str) -> None:
    missing = postgres_url.rsplit("/", 1)[0] + "/headroom_no_such_database"
    run = subprocess.run([*WARM_HEADROOM, "status"],
                         env=_env(HEADROOM_DB__URL=f"{missing}?sslpassword={SECRET}"),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and SECRET not in run.stdout + run.stderr
    assert run.stderr.startswith(f"error: cannot reach database {missing}?sslpassword=***: ")


def test_the_demos_json_summary_names_its_store_without_the_password_of_its_query(
        postgres_url: str, tmp_path: Path) -> None:
    run = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "1", "--no-dashboard", "--json"],
                         env=_env(HEADROOM_DB__URL=f"{postgres_url}?password={SECRET}"),
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert SECRET not in run.stdout + run.stderr
    assert json.loads(run.stdout)["db_url"] == f"{postgres_url}?password=***"
