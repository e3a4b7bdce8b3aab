"""pytest takes this directory's fixtures from here; they are defined, and type-checked, in
scheduler_fixtures.py (mypy would name every directory's conftest.py "conftest", so pyproject.toml
excludes these re-exports from [tool.mypy])."""

from scheduler_fixtures import stub

__all__ = ["stub"]
