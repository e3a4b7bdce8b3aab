"""Keys of a ``simulate`` models file that look like a misspelt known key.

The file allows extra keys (DESIGN.md), so an unknown key is not refused; but one close to a key
the file knows (``isolaton`` for ``isolation``) was meant as that key, and its value would be
dropped without a word while the default is used. These are named, as warnings."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from pydantic import BaseModel


def _near(key: str, model: BaseModel) -> str | None:
    known = [k for k in type(model).model_fields if k != key]
    found = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return found[0] if found else None


def _walk(model: BaseModel, path: str) -> Iterator[tuple[str, str, str]]:
    """(path of the mapping, unknown key, the known key it is close to) in ``model``."""
    for key in sorted(model.model_extra or {}):
        near = _near(key, model)
        if near is not None:
            yield path, key, near
    for name in type(model).model_fields:
        value = getattr(model, name)
        where = f"{path}.{name}" if path else name
        if isinstance(value, BaseModel):
            yield from _walk(value, where)
        elif isinstance(value, dict):  # a section by name (``fleet.pools.L4``)
            for key, section in value.items():
                if isinstance(section, BaseModel):
                    yield from _walk(section, f"{where}.{key}")


def misspelt_keys(source: str, root: BaseModel, models: list[BaseModel],
                  names: list[str]) -> tuple[str, ...]:
    """One line per misspelt key: ``M.yaml: models[0] (chat): isolaton: unknown key, ignored;
    did you mean isolation?`` (``fleet.gpus_per_nodes: ...`` outside the models)."""
    lines = [f"{source}: {f'{path}.' if path else ''}{key}: unknown key, ignored; did you mean "
             f"{near}?" for path, key, near in _walk(root, "")]  # the models are a list: not here
    for index, (model, name) in enumerate(zip(models, names, strict=True)):
        for path, key, near in _walk(model, ""):
            field = f"{path}.{key}" if path else key
            lines.append(f"{source}: models[{index}] ({name}): {field}: unknown key, ignored; "
                         f"did you mean {near}?")
    return tuple(lines)
