"""Patch semantics: JSON merge patch (RFC 7386), strategic merge patch (for the fields Headroom
and its tests use), JSON patch (RFC 6902), and the field paths server-side apply tracks."""

from __future__ import annotations

import copy
from typing import Any

# Lists that strategic merge patch merges element-wise by a key (others are replaced whole).
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "env": "name", "volumes": "name",
    "volumeMounts": "mountPath", "ports": "containerPort", "conditions": "type",
    "imagePullSecrets": "name", "taints": "key",
}

Path = tuple[str, ...]


class PatchError(Exception):
    """A malformed patch (HTTP 400) or a failed JSON-patch test (HTTP 422)."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(out.get(key), list):
            out[key] = _merge_list(out[key], value, MERGE_KEYS[key])
        else:
            out[key] = strategic_merge_patch(out.get(key), value)
    return out


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(f"strategic merge patch: list item lacks merge key {merge_key!r}")
        index = next((i for i, old in enumerate(merged)
                      if isinstance(old, dict) and old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(strategic_merge_patch({}, item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("json patch: body must be a list of operations")
    out = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError("json patch: each operation needs 'op' and 'path'")
        keys = _pointer(op["path"])
        if op["op"] == "test":
            if _get_pointer(out, keys) != op.get("value"):
                raise PatchError(f"json patch: test failed at {op['path']}", code=422)
        elif op["op"] in ("add", "replace"):
            out = _set_pointer(out, keys, copy.deepcopy(op.get("value")), op["op"])
        elif op["op"] == "remove":
            out = _set_pointer(out, keys, None, "remove")
        else:
            raise PatchError(f"json patch: unsupported op {op['op']!r}")
    return out


def _pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"json patch: bad pointer {pointer!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def _get_pointer(doc: Any, keys: list[str]) -> Any:
    for key in keys:
        if isinstance(doc, list):
            doc = doc[int(key)] if key.isdigit() and int(key) < len(doc) else None
        elif isinstance(doc, dict):
            doc = doc.get(key)
        else:
            return None
    return doc


def _set_pointer(doc: Any, keys: list[str], value: Any, op: str) -> Any:
    if not keys:
        return value
    parent = _get_pointer(doc, keys[:-1])
    last = keys[-1]
    if isinstance(parent, dict):
        if op == "remove":
            if last not in parent:
                raise PatchError(f"json patch: nothing to remove at /{'/'.join(keys)}", 422)
            del parent[last]
        elif op == "replace" and last not in parent:
            raise PatchError(f"json patch: nothing to replace at /{'/'.join(keys)}", 422)
        else:
            parent[last] = value
    elif isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if op == "add":
            parent.insert(index, value)
        elif op == "remove":
            del parent[index]
        else:
            parent[index] = value
    else:
        raise PatchError(f"json patch: no parent for /{'/'.join(keys)}", 422)
    return doc


# -- field paths (server-side apply ownership) ----------------------------------------------
def leaf_paths(doc: Any, prefix: Path = ()) -> set[Path]:
    """Paths to every leaf: scalars, lists (atomic here) and empty maps."""
    if isinstance(doc, dict) and doc:
        paths: set[Path] = set()
        for key, value in doc.items():
            paths |= leaf_paths(value, (*prefix, key))
        return paths
    return {prefix} if prefix else set()


def get_path(doc: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def set_path(doc: dict[str, Any], path: Path, value: Any) -> None:
    for key in path[:-1]:
        nxt = doc.get(key)
        if not isinstance(nxt, dict):
            nxt = {}
            doc[key] = nxt
        doc = nxt
    doc[path[-1]] = copy.deepcopy(value)


def delete_path(doc: dict[str, Any], path: Path) -> None:
    """Remove a leaf and the maps it leaves empty."""
    parents: list[tuple[dict[str, Any], str]] = []
    node: Any = doc
    for key in path[:-1]:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            return
        parents.append((node, key))
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, key in reversed(parents):
        if parent[key] == {}:
            del parent[key]
        else:
            break


def overlaps(a: Path, b: Path) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def fields_v1(paths: set[Path]) -> dict[str, Any]:
    """Render paths in the FieldsV1 shape (``{"f:spec": {"f:replicas": {}}}``)."""
    out: dict[str, Any] = {}
    for path in sorted(paths):
        node = out
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return out
