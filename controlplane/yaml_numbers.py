"""YAML read by Headroom (settings, simulate models files): ``true`` / ``false`` are not numbers.

pydantic's lax mode reads a YAML boolean given for a number as 1 or 0 (``interval_s: true`` would
tick every second, ``per_replica_rps: true`` would size a model at one request per second);
models inheriting ``NoBoolForANumber`` refuse it, naming the field as for any other bad value.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationInfo, field_validator


def wants_number(annotation: Any) -> bool:
    """int or float, alone, optional, or as the items of a tuple or the values of a dict (not
    bool)."""
    if annotation in (int, float):
        return True
    args = get_args(annotation)
    origin = get_origin(annotation)
    if origin is Annotated:
        return wants_number(args[0])
    if origin in (Union, UnionType, tuple):
        return bool not in args and any(wants_number(a) for a in args if a is not type(None))
    if origin is dict and len(args) == 2:
        return wants_number(args[1])
    return False


def has_bool(value: object) -> bool:
    if isinstance(value, Mapping):
        return any(isinstance(v, bool) for v in value.values())
    return isinstance(value, bool) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, bool) for v in value))


class NoBoolForANumber(BaseModel):
    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: object, info: ValidationInfo) -> object:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and has_bool(value) and wants_number(field.annotation):
            raise ValueError(f"expected a number, got {value!r}".replace("True", "true")
                             .replace("False", "false"))
        return value
