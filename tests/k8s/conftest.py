"""pytest takes this directory's fixtures from here; they are defined, and type-checked, in
k8s_fixtures.py (mypy would name every directory's conftest.py "conftest", so pyproject.toml
excludes these re-exports from [tool.mypy])."""

from k8s_fixtures import apiserver, clock, kube

__all__ = ["apiserver", "clock", "kube"]
