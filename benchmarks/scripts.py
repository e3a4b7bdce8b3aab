"""Load a benchmark script by path (several are named ``run.py``, so they are not imported as
modules of one package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any


def load_script(path: Path, name: str) -> Any:
    """The module of the script at ``path``, run once under ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
