"""Reading a models file (``headroom simulate --models``, ``headroom models import``): YAML with
unique keys, read as UTF-8, and each of pydantic's errors put as the file, the model (index and
name) and the field at fault."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from controlplane.domain.errors import listed_problems
from controlplane.yaml_keys import UniqueKeyLoader
from scheduler.domain.names import MAX_MODEL_CHARS, name_problem

Schema = TypeVar("Schema", bound=BaseModel)


class ModelsFileError(ValueError):
    """A models file that cannot be used; the message names file, model and field."""


def read_mapping(path: Path, expected: str) -> dict[str, Any]:
    """The file's YAML mapping; ``expected`` says what it should hold, for the error."""
    if not path.is_file():
        raise ModelsFileError(f"{path}: no such models file")
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)
    except UnicodeDecodeError as error:
        raise ModelsFileError(f"{path}: not UTF-8 text (byte {error.start}: "
                              f"{error.reason})") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None)  # e.g. a duplicate key 'name'
        detail = f" ({problem})" if problem else ""
        raise ModelsFileError(f"{path}:{where}: invalid YAML{detail}") from None
    if not isinstance(raw, dict):
        raise ModelsFileError(f"{path}: expected a mapping with {expected}")
    return raw


def where(raw: dict[str, Any], loc: tuple[int | str, ...]) -> str:
    """``models[2] (llama): profile.0.throughput_rps`` for a pydantic location."""
    if len(loc) >= 2 and loc[0] == "models" and isinstance(loc[1], int):
        models = raw.get("models") or []
        name = models[loc[1]].get("name") if loc[1] < len(models) and isinstance(
            models[loc[1]], dict) else None
        rest = ".".join(str(p) for p in loc[2:])  # none: the model's own check names a field
        # not "(   )", nor a name it refuses (a control character, a megabyte): the index names it
        shown = f" ({name})" if name and str(name).strip() and name_problem(
            str(name), MAX_MODEL_CHARS) is None else ""
        return f"models[{loc[1]}]" + shown + (f": {rest}" if rest else "")
    return ".".join(str(p) for p in loc) or "(root)"


def problems(path: Path, raw: dict[str, Any], error: ValidationError,
             more: Sequence[str] = ()) -> ModelsFileError:
    """Every error pydantic found, one line each naming the file, the model and the field, then
    the lines ``more`` (``listed_problems``); an unknown key a missing one's line names as
    misspelled is not listed again."""
    errors = error.errors()
    lines: list[str] = []
    explained: set[tuple[int | str, ...]] = set()
    for problem in errors:
        loc = tuple(problem["loc"])
        if problem["type"] == "extra_forbidden" and loc in explained:
            continue
        msg = str(problem["msg"]).removeprefix("Value error, ")
        if (problem["type"] != "value_error" and "got" not in msg
                and isinstance(problem.get("input"), int | float)):
            msg += f", got {problem['input']}"
        if problem["type"] == "missing":
            hint, named = _misspelled(loc, errors)
            msg += hint
            explained.update((*loc[:-1], key) for key in named)
        lines.append(f"{path}: {where(raw, loc)}: {msg}")
    return ModelsFileError(listed_problems([*lines, *more]))


def _misspelled(loc: tuple[int | str, ...],
                errors: Sequence[ErrorDetails]) -> tuple[str, list[str]]:
    """For a missing key: the unknown keys beside it (`engne:` for `engine:`), which pydantic
    reports as errors of their own, so that the line says what to rename; and the keys named."""
    unknown = [str(e["loc"][-1]) for e in errors
               if e["type"] == "extra_forbidden" and tuple(e["loc"][:-1]) == loc[:-1]]
    if not unknown:
        return "", []
    close = difflib.get_close_matches(str(loc[-1]), unknown, n=1)
    if close:
        return f" (the entry has an unknown key {close[0]!r}: misspelled?)", close
    return f" (the entry has unknown key(s) {', '.join(repr(k) for k in unknown)})", unknown


def validated(path: Path, schema: type[Schema], expected: str,
              context: Callable[[dict[str, Any]], object] | None = None,
              file_problems: Callable[[dict[str, Any]], list[str]] | None = None) -> Schema:
    """The file read (``read_mapping``) and validated against ``schema``: its problems, each
    as one line naming the file, the model and the field. ``context`` makes pydantic's
    validation context of the file's mapping (what a model's checks read beyond the model).
    ``file_problems`` finds those of the whole file in its mapping (``duplicate_names``),
    listed with pydantic's in the same run rather than once the models are valid."""
    raw = read_mapping(path, expected)
    more = [] if file_problems is None else file_problems(raw)
    try:
        parsed = schema.model_validate(raw, context=None if context is None else context(raw))
    except ValidationError as error:
        raise problems(path, raw, error, more) from None
    if more:
        raise ModelsFileError(listed_problems(more))
    return parsed


def duplicate_names(path: Path, names: Sequence[str]) -> list[str]:
    """The line naming every name given to two models of the file; none when they are unique."""
    dupes = sorted({n for n in names if names.count(n) > 1})
    return [f"{path}: models: duplicate name(s) {dupes}"] if dupes else []


def unique_names(path: Path, names: list[str]) -> None:
    """A name given to two models of the file is an error naming them."""
    if lines := duplicate_names(path, names):
        raise ModelsFileError(lines[0])


def written_names(raw: dict[str, Any]) -> list[str]:
    """The names the file's models give, as written (whether or not the rest of the model is
    valid): a name two of them give is a problem however their other fields are mended."""
    models = raw.get("models")
    if not isinstance(models, list):
        return []
    return [m["name"] for m in models if isinstance(m, dict) and isinstance(m.get("name"), str)]
