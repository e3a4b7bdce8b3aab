"""Label selectors (query strings and ``LabelSelector`` objects) and field selectors."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

Predicate = Callable[[dict[str, str]], bool]

_SET_REQ = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_requirements(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def _requirement(text: str) -> Predicate:
    match = _SET_REQ.match(text)
    if match:
        key, op, values = match.group(1), match.group(2), {
            v.strip() for v in match.group(3).split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    text = text.strip()
    if "!=" in text:
        key, value = (s.strip() for s in text.split("!=", 1))
        return lambda labels: labels.get(key) != value
    if "=" in text:
        key, value = (s.strip() for s in text.replace("==", "=").split("=", 1))
        return lambda labels: labels.get(key) == value
    if text.startswith("!"):
        key = text[1:].strip()
        return lambda labels: key not in labels
    return lambda labels: text in labels


def parse_label_selector(text: str) -> Predicate:
    """``a=b,c!=d,e in (x,y),!f`` -> predicate over a label map."""
    requirements = [_requirement(r) for r in _split_requirements(text or "")]
    return lambda labels: all(req(labels) for req in requirements)


def matches_label_selector(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A ``LabelSelector`` object (matchLabels + matchExpressions); empty selects everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, op = expression["key"], expression["operator"]
        values = set(expression.get("values") or [])
        present = key in labels
        if (op == "In" and labels.get(key) not in values) or (
                op == "NotIn" and present and labels[key] in values) or (
                op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def _field(obj: dict[str, Any], dotted: str) -> str:
    node: Any = obj
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return "" if node is None else str(node)


def parse_field_selector(text: str) -> Callable[[dict[str, Any]], bool]:
    """``spec.nodeName=n1,status.phase!=Succeeded`` -> predicate over an object."""
    checks: list[Callable[[dict[str, Any]], bool]] = []
    for part in _split_requirements(text or ""):
        if "!=" in part:
            path, value = (s.strip() for s in part.split("!=", 1))
            checks.append(partial(_field_differs, path=path, value=value))
        else:
            path, value = (s.strip() for s in part.replace("==", "=").split("=", 1))
            checks.append(partial(_field_equals, path=path, value=value))
    return lambda obj: all(check(obj) for check in checks)


def _field_equals(obj: dict[str, Any], *, path: str, value: str) -> bool:
    return _field(obj, path) == value


def _field_differs(obj: dict[str, Any], *, path: str, value: str) -> bool:
    return _field(obj, path) != value
