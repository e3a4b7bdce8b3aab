"""YAML read by Headroom (settings, models files): ``true`` / ``false`` are not numbers, and in
a models file neither is quoted text.

pydantic's lax mode reads a YAML boolean given for a number as 1 or 0 (``interval_s: true`` would
tick every second, ``per_replica_rps: true`` would size a model at one request per second);
models inheriting ``NoBoolForANumber`` refuse it, naming the field as for any other bad value.
It also reads quoted text as the number it spells (``min_replicas: '3'``): the settings take it,
as their environment variables are all text, but a models file, YAML alone, refuses it
(``NoTextForANumber``), so a file reads the same to every YAML tool.
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
    return _holds(value, bool)


def _holds(value: object, kind: type) -> bool:
    """Whether ``value`` is a ``kind``, or a list, tuple or mapping's value of one is."""
    if isinstance(value, Mapping):
        return any(isinstance(v, kind) for v in value.values())
    return isinstance(value, kind) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, kind) for v in value))


def wants_only_number(annotation: Any) -> bool:
    """A number (``wants_number``) that text is not also an answer for (not ``float | str``)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return wants_only_number(args[0])
    if origin is dict and len(args) == 2:  # its keys are text
        return wants_only_number(args[1])
    return wants_number(annotation) and str not in args


class NoBoolForANumber(BaseModel):
    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: object, info: ValidationInfo) -> object:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and has_bool(value) and wants_number(field.annotation):
            raise ValueError(f"expected a number, got {value!r}".replace("True", "true")
                             .replace("False", "false"))
        return value


class NoTextForANumber(NoBoolForANumber):
    @field_validator("*", mode="before")
    @classmethod
    def _no_text_for_a_number(cls, value: object, info: ValidationInfo) -> object:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _holds(value, str) and wants_only_number(field.annotation):
            raise ValueError(f"expected a number, got {value!r} (quoted: text, not a number)")
        return value
