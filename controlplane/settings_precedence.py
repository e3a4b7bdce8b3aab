"""How the sources of settings combine: a higher source's value of a setting replaces the lower
one's, and only groups combine field by field.

pydantic-settings merges its sources with ``deep_update``, which merges every mapping key by key.
That is right for a group (``HEADROOM_AUTOSCALING__POLICY`` beside a file's ``autoscaling:``
keeps the file's other autoscaling fields) and wrong for a setting whose value is a mapping:
``HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS='{}'`` could never clear a budget the file set, and
``{"globex": 8}`` added to the file's budgets instead of replacing them. So each source hands
its mapping values to the merge as a read-only mapping that is no ``dict``, which ``deep_update``
replaces whole (pydantic validates it as the dict it holds). Variables naming keys below a
mapping (``HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS__ACME=4``) name those keys only, so they set
them over the lower source's mapping and leave its other keys."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from controlplane.settings_env import ENV_PREFIX, unwrap_optional

KeyPath = tuple[str, ...]


def whole_mappings(model: type[BaseModel], data: Mapping[str, Any],
                   keyed_only: Callable[[KeyPath], bool] = lambda path: False,
                   above: KeyPath = ()) -> dict[str, Any]:
    """``data`` (one source's values of ``model``) with each mapping that is a setting's value,
    not a group, made read-only so the merge replaces it; one that ``keyed_only`` says was given
    key by key stays a dict, merged with the lower sources' mapping."""
    marked: dict[str, Any] = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        annotation = unwrap_optional(field.annotation) if field is not None else None
        path = (*above, key)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) \
                and isinstance(value, dict):
            marked[key] = whole_mappings(annotation, value, keyed_only, path)
        elif field is not None and isinstance(value, dict) and not keyed_only(path):
            marked[key] = MappingProxyType(value)
        else:
            marked[key] = value
    return marked


def env_keyed_only(path: KeyPath, environ: Mapping[str, str]) -> bool:
    """Whether the environment gives the mapping at ``path`` only by variables naming its keys
    (``HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS__ACME``): no variable names it, and no group
    above it given as JSON holds it."""
    values = {name.upper(): value for name, value in environ.items()}
    for depth in range(len(path), 0, -1):
        value = values.get(ENV_PREFIX + "__".join(path[:depth]).upper())
        if value is None:
            continue
        if depth == len(path):
            return False
        try:
            held: Any = json.loads(value)
        except ValueError:
            return False  # pydantic-settings refuses it first
        for part in path[depth:]:
            held = held.get(part) if isinstance(held, dict) else None
        if held is not None:
            return False
    return True


class WholeMappings(PydanticBaseSettingsSource):
    """``source`` with its mapping values given whole (``whole_mappings``); ``environment``
    when it reads ``HEADROOM_*`` variables, whose keys of a mapping are merged one by one."""

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource,
                 environment: bool = False) -> None:
        super().__init__(settings_cls)
        self._source = source
        self._environment = environment

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads through the wrapped source

    def __call__(self) -> dict[str, Any]:
        environ = dict(os.environ)
        keyed_only: Callable[[KeyPath], bool] = (
            (lambda path: env_keyed_only(path, environ)) if self._environment
            else (lambda path: False))
        return whole_mappings(self.settings_cls, self._source(), keyed_only)

    def __repr__(self) -> str:
        return f"WholeMappings({self._source!r})"
