"""pytest takes this directory's fixtures from here; they are defined, and type-checked, in
dashboard_fixtures.py (mypy would name every directory's conftest.py "conftest", so pyproject.toml
excludes these re-exports from [tool.mypy])."""

from dashboard_fixtures import dashboard_env, gapped, seeded, seeded_url

__all__ = ["dashboard_env", "gapped", "seeded", "seeded_url"]
