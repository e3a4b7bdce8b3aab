"""pytest takes this directory's fixtures from here; they are defined, and type-checked, in
contract_fixtures.py (mypy would name every directory's conftest.py "conftest", so pyproject.toml
excludes these re-exports from [tool.mypy])."""

from contract_fixtures import gpu_harness, harness

__all__ = ["gpu_harness", "harness"]
