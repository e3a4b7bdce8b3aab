"""The environment half of settings: pydantic-settings reads ``HEADROOM_*`` variables but
ignores those that name no field and reports bad JSON by group, not by variable. These checks
name the variable at fault (``root`` is the settings class)."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_settings import SettingsError

ENV_PREFIX = "HEADROOM_"
_SERVICE_LINK = re.compile(r"^(tcp|udp|sctp)://", re.IGNORECASE)  # Kubernetes' <SVC>_PORT
#: the names Kubernetes injects for every Service of the namespace (``<SVC>_SERVICE_HOST``,
#: ``<SVC>_SERVICE_PORT[_<NAME>]``, ``<SVC>_PORT[_<N>_<PROTO>[_PROTO|_PORT|_ADDR]]``)
_SERVICE_ENV = re.compile(r"_(SERVICE_HOST|SERVICE_PORT(_\w+)?"
                          r"|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$", re.IGNORECASE)


def unknown_env_variable(root: type[BaseModel], environ: Mapping[str, str]) -> str | None:
    """Why a ``HEADROOM_*`` variable that names no setting is a mistake, or None.

    pydantic-settings ignores such variables, so a misspelt one would silently leave its
    setting at the default (``HEADROOM_SAFETY_DRY_RUN=true``, one ``_`` short, would apply
    plans). Refused: a group that does not exist (``HEADROOM_RECONCIL__INTERVAL_S``), a group and
    field joined by one ``_`` instead of ``__``, a near-miss of a top-level field
    (``HEADROOM_BACKND``) and a path going below a single value or into a list
    (``HEADROOM_SAFETY__DRY_RUN__ENABLED``: pydantic would blame the config file). Other names
    are left alone: Kubernetes injects ``HEADROOM_GRPC_PORT`` and friends for Headroom's own
    Services."""
    fields = root.model_fields
    for name in sorted(environ):
        if not name.upper().startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX):].lower()
        head = rest.split("__", 1)[0]
        if head in fields:
            below = _below_a_value(root, name)
            if below is not None:
                return below
            continue
        if "__" in rest:
            near = difflib.get_close_matches(head, list(fields), n=1)
            hint = f"; did you mean {ENV_PREFIX}{near[0].upper()}__...?" if near else ""
            return f"environment variable {name}: unknown group {head!r}{hint}"
        for group, info in fields.items():
            model = info.annotation
            if (rest.startswith(f"{group}_") and isinstance(model, type)
                    and issubclass(model, BaseModel)
                    and rest[len(group) + 1:] in model.model_fields
                    and not _SERVICE_LINK.match(environ[name])):
                return (f"environment variable {name}: unknown key; did you mean "
                        f"{ENV_PREFIX}{group.upper()}__{rest[len(group) + 1:].upper()} "
                        "(groups and fields are joined by __)?")
        near = difflib.get_close_matches(rest, list(fields), n=1, cutoff=0.8)
        if near and not _SERVICE_ENV.search(name):
            return (f"environment variable {name}: unknown key; did you mean "
                    f"{ENV_PREFIX}{near[0].upper()}?")
    return None


def _below_a_value(root: type[BaseModel], name: str) -> str | None:
    """Why variable ``name`` (of a known top-level field) goes below one value or into a list,
    or None: the ``__`` path is walked through the settings' groups and mappings (a mapping's
    key is any name, ``HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS__ACME``)."""
    parts = name[len(ENV_PREFIX):].lower().split("__")
    annotation: Any = root
    for depth, part in enumerate(parts):
        annotation = unwrap_optional(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(part)
            if field is None and depth < len(parts) - 1:  # keys below an unknown key
                near = difflib.get_close_matches(part, list(annotation.model_fields), n=1)
                meant = ENV_PREFIX + "__".join([*parts[:depth], *near]).upper()
                hint = f"; did you mean {meant}?" if near else ""
                return (f"environment variable {name}: "
                        f"{'.'.join(parts[:depth + 1])}: unknown key{hint}")
            if field is None:  # an unknown key of a group: pydantic names it, with a near-miss
                return None
            annotation = field.annotation
            continue
        dotted, above = ".".join(parts[:depth]), ENV_PREFIX + "__".join(parts[:depth]).upper()
        if get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
            continue
        if get_origin(annotation) in (list, tuple):
            return (f"environment variable {name}: {dotted} is a list, with no keys below it; "
                    f"give it whole as JSON in {above}")
        return (f"environment variable {name}: {dotted} is a single value, with no keys below "
                f"it; did you mean {above}?")
    return None


def unwrap_optional(annotation: Any) -> Any:
    """``X`` of ``X | None`` (pydantic's annotation of an optional field); others as they are."""
    if get_origin(annotation) in (Union, UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


_ENV_PARSE = re.compile(r'error parsing value for field "(\w+)" from source "EnvSettingsSource"')


def env_variable_of(loc: tuple[int | str, ...], environ: Mapping[str, str]) -> str | None:
    """``environment variable NAME`` when a ``HEADROOM_*`` variable set the value at ``loc`` (a
    settings error's location): the field's own, or a group above it as JSON. The environment
    beats the config file, so the error is the variable's; None when none did."""
    names = {name.upper(): name for name in environ}
    parts = [str(part).upper() for part in loc]
    for depth in range(len(parts), 0, -1):
        name = names.get(ENV_PREFIX + "__".join(parts[:depth]))
        if name is not None:
            return f"environment variable {name}"
    return None


def env_json_error(root: type[BaseModel], error: SettingsError,
                   environ: Mapping[str, str]) -> str | None:
    """The variable behind pydantic-settings' "error parsing value for field "sim" from source
    "EnvSettingsSource"" (lists, mappings and whole groups are read as JSON), or None."""
    match = _ENV_PARSE.search(str(error))
    if match is None:
        return None
    head = match.group(1)
    names = [n for n in sorted(environ) if n.upper().startswith(ENV_PREFIX)
             and n[len(ENV_PREFIX):].lower().split("__", 1)[0] == head]
    bad = [n for n in names if _read_as_json(root, n) and not _is_json(environ[n])] or names
    cause = str(error.__cause__).splitlines()[0] if error.__cause__ else "invalid"
    return (f"environment variable {' or '.join(bad) or ENV_PREFIX + head.upper()}: not valid "
            f"JSON ({cause}); lists, mappings and groups are JSON, e.g. '[\"a\", \"b\"]'")


def _read_as_json(root: type[BaseModel], name: str) -> bool:
    """Whether pydantic-settings parses the variable as JSON: a group, list, tuple or mapping."""
    model: Any = root
    for part in name[len(ENV_PREFIX):].lower().split("__"):
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(
            model, BaseModel) else None
        if field is None:
            return False
        model = field.annotation
    return get_origin(model) in (list, tuple, dict) or (
        isinstance(model, type) and issubclass(model, BaseModel))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
