"""The object store behind the test API server: resourceVersions with optimistic concurrency,
field ownership (``managedFields``) for server-side apply, status subresources and validation.

Simplifications against a real API server (documented, deliberate): lists are atomic for field
ownership (real SSA merges associative lists by key); a no-op write keeps the resourceVersion.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .patching import Path, delete_path, fields_v1, get_path, leaf_paths, overlaps, set_path
from .resources import ResourceType
from .validation import Invalid, validate_object

Key = tuple[str, str, str]  # (resource key, namespace, name)
Owner = tuple[str, str]  # (field manager, operation): Apply and Update entries are separate
SYSTEM_METADATA = ("name", "namespace", "uid", "resourceVersion", "generation",
                   "creationTimestamp", "managedFields", "deletionTimestamp")


class ApiError(Exception):
    """An HTTP error with a Kubernetes ``Status`` body."""

    def __init__(self, code: int, reason: str, message: str,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}

    def status(self) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "details": self.details,
                "code": self.code}


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class Ownership:
    operation: str  # Apply | Update
    api_version: str
    paths: set[Path] = field(default_factory=set)
    time: str = ""


def tracked_paths(obj: dict[str, Any]) -> set[Path]:
    """Leaf paths that field ownership covers: labels, annotations and everything but
    metadata, status, apiVersion and kind."""
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    meta = obj.get("metadata") or {}
    for name in ("labels", "annotations"):
        if meta.get(name):
            body.setdefault("metadata", {})[name] = meta[name]
    return leaf_paths(body)


class ObjectStore:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._objects: dict[Key, dict[str, Any]] = {}
        self._owners: dict[Key, dict[Owner, Ownership]] = {}
        self._rv = 0
        self.computed_status: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}

    # -- reads ---------------------------------------------------------------------------
    def render(self, res: ResourceType, key: Key) -> dict[str, Any]:
        obj = copy.deepcopy(self._objects[key])
        owners = self._owners.get(key, {})
        managed = [{"manager": m, "operation": op, "apiVersion": o.api_version,
                    "time": o.time, "fieldsType": "FieldsV1", "fieldsV1": fields_v1(o.paths)}
                   for (m, op), o in sorted(owners.items()) if o.paths]
        if managed:
            obj["metadata"]["managedFields"] = managed
        hook = self.computed_status.get(res.kind)
        if hook is not None:
            obj["status"] = hook(obj)
        return obj

    def get(self, res: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            key = (res.key, namespace, name)
            if key not in self._objects:
                raise not_found(res, name)
            return self.render(res, key)

    def list(self, res: ResourceType, namespace: str,
             keep: Callable[[dict[str, Any]], bool]) -> tuple[list[dict[str, Any]], str]:
        with self.lock:
            keys = sorted(k for k in self._objects
                          if k[0] == res.key and (not namespace or k[1] == namespace))
            items = [self.render(res, k) for k in keys]
            return [i for i in items if keep(i)], str(self._rv)

    def exists(self, res: ResourceType, namespace: str, name: str) -> bool:
        with self.lock:
            return (res.key, namespace, name) in self._objects

    # -- writes --------------------------------------------------------------------------
    def create(self, res: ResourceType, namespace: str, body: dict[str, Any], manager: str,
               keep_status: bool = False) -> dict[str, Any]:
        with self.lock:
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            _check_identity(res, namespace, meta)
            name = meta.get("name", "")
            key = (res.key, namespace, name)
            if key in self._objects:
                raise ApiError(409, "AlreadyExists",
                               f'{res.plural}{"." + res.group if res.group else ""} "{name}" '
                               "already exists", {"name": name, "kind": res.plural})
            if res.namespaced:
                meta["namespace"] = namespace
            if res.has_status and not keep_status:
                obj.pop("status", None)
            obj["apiVersion"], obj["kind"] = res.api_version, res.kind
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            owners = {(manager, "Update"): Ownership("Update", res.api_version,
                                                     tracked_paths(obj), now_rfc3339())}
            return self._commit(res, key, obj, owners)

    def replace(self, res: ResourceType, namespace: str, name: str, body: dict[str, Any],
                manager: str, subresource: str = "",
                operation: str = "Update") -> dict[str, Any]:
        """Store ``body`` as the new object (PUT, or the result of a patch)."""
        with self.lock:
            key = (res.key, namespace, name)
            old = self._current(res, key, name)
            expected = (body.get("metadata") or {}).get("resourceVersion")
            if expected and expected != old["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            new = copy.deepcopy(body)
            new["apiVersion"], new["kind"] = res.api_version, res.kind
            meta = new.setdefault("metadata", {})
            if meta.get("name", name) != name:
                raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
            for system in SYSTEM_METADATA:
                if system in old["metadata"]:
                    meta[system] = old["metadata"][system]
                else:
                    meta.pop(system, None)
            if subresource == "status":
                status = new.get("status")
                new = copy.deepcopy(old)
                new["status"] = status
            elif res.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            owners = self._take_over(key, old, new, manager, operation, res.api_version)
            return self._commit(res, key, new, owners, old)

    def apply(self, res: ResourceType, namespace: str, name: str, body: dict[str, Any],
              manager: str, force: bool) -> dict[str, Any]:
        """Server-side apply: create or merge the applied configuration under ``manager``."""
        with self.lock:
            meta = body.get("metadata") or {}
            if meta.get("name", name) != name:
                raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
            key = (res.key, namespace, name)
            applied = tracked_paths(body)
            if key not in self._objects:
                self.create(res, namespace, {**body, "metadata": {**meta, "name": name}}, manager)
                self._owners[key] = {(manager, "Apply"): Ownership("Apply", res.api_version,
                                                                   applied, now_rfc3339())}
                return self.render(res, key)
            old = self._objects[key]
            if meta.get("resourceVersion") and meta["resourceVersion"] != old["metadata"][
                    "resourceVersion"]:
                raise conflict(res, name)
            owners = {m: Ownership(o.operation, o.api_version, set(o.paths), o.time)
                      for m, o in self._owners.get(key, {}).items()}
            self._resolve_conflicts(res, name, old, body, applied, owners, manager, force)
            new = copy.deepcopy(old)
            mine = owners.get((manager, "Apply"))
            others = set().union(*(o.paths for k, o in owners.items() if k != (manager, "Apply")))
            for path in (mine.paths if mine else set()) - applied:
                if not any(overlaps(path, p) for p in others):
                    delete_path(new, path)
            for path in applied:
                set_path(new, path, get_path(body, path))
            owners[(manager, "Apply")] = Ownership("Apply", res.api_version, applied,
                                                   now_rfc3339())
            return self._commit(res, key, new, owners, old)

    def delete(self, res: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            key = (res.key, namespace, name)
            obj = self.render(res, self._key_or_404(res, key, name))
            del self._objects[key]
            self._owners.pop(key, None)
            self._rv += 1
            return obj

    # -- internals -----------------------------------------------------------------------
    def _key_or_404(self, res: ResourceType, key: Key, name: str) -> Key:
        if key not in self._objects:
            raise not_found(res, name)
        return key

    def _current(self, res: ResourceType, key: Key, name: str) -> dict[str, Any]:
        return self._objects[self._key_or_404(res, key, name)]

    def _resolve_conflicts(self, res: ResourceType, name: str, old: dict[str, Any],
                           body: dict[str, Any], applied: set[Path],
                           owners: dict[Owner, Ownership], manager: str, force: bool) -> None:
        clashes: list[tuple[str, Path]] = []
        for (other, _), owned in owners.items():
            if other == manager:
                continue
            for path in applied:
                hits = [p for p in owned.paths if overlaps(p, path)]
                if hits and get_path(old, path) != get_path(body, path):
                    clashes.append((other, path))
                    if force:
                        owned.paths -= set(hits)
        if clashes and not force:
            causes = [{"type": "FieldManagerConflict", "field": "." + ".".join(p),
                       "message": f'conflict with "{m}": .{".".join(p)}'} for m, p in clashes]
            raise ApiError(409, "Conflict", f"Apply failed with {len(clashes)} conflict(s): "
                           + "; ".join(c["message"] for c in causes),
                           {"name": name, "kind": res.plural, "causes": causes})

    def _take_over(self, key: Key, old: dict[str, Any], new: dict[str, Any], manager: str,
                   operation: str, api_version: str) -> dict[Owner, Ownership]:
        before, after = tracked_paths(old), tracked_paths(new)
        changed = {p for p in after if get_path(old, p) != get_path(new, p)}
        removed = before - after
        owners = {m: Ownership(o.operation, o.api_version, o.paths - changed - removed, o.time)
                  for m, o in self._owners.get(key, {}).items()}
        if changed:
            mine = owners.get((manager, operation)) or Ownership(operation, api_version)
            owners[(manager, operation)] = Ownership(operation, api_version,
                                                     mine.paths | changed, now_rfc3339())
        return owners

    def _commit(self, res: ResourceType, key: Key, new: dict[str, Any],
                owners: dict[Owner, Ownership],
                old: dict[str, Any] | None = None) -> dict[str, Any]:
        unchanged = old is not None and _strip(old) == _strip(new) and {
            m: o.paths for m, o in self._owners.get(key, {}).items() if o.paths} == {
            m: o.paths for m, o in owners.items() if o.paths}
        if unchanged:
            return self.render(res, key)
        if old is not None and _spec(old) != _spec(new):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        new["metadata"]["resourceVersion"] = str(self._rv + 1)
        previous = (self._objects.get(key), self._owners.get(key))
        self._objects[key], self._owners[key] = new, owners
        try:
            validate_object(self.render(res, key))
        except Invalid as error:
            if previous[0] is None:
                del self._objects[key]
                self._owners.pop(key, None)
            else:
                self._objects[key], self._owners[key] = previous[0], previous[1] or {}
            raise ApiError(422, "Invalid", f'{res.kind} "{key[2]}" is invalid: {error}',
                           {"name": key[2], "kind": res.kind}) from None
        self._rv += 1
        return self.render(res, key)


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out.get("metadata", {}).pop("managedFields", None)
    out.get("metadata", {}).pop("resourceVersion", None)
    return out


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _check_identity(res: ResourceType, namespace: str, meta: dict[str, Any]) -> None:
    if res.namespaced and not namespace:
        raise ApiError(400, "BadRequest", f"{res.kind} must be created in a namespace")
    if res.namespaced and meta.get("namespace", namespace) != namespace:
        raise ApiError(400, "BadRequest", "the namespace of the provided object does not match "
                       "the namespace sent on the request")
    if not meta.get("name"):
        raise ApiError(422, "Invalid", f"{res.kind} is invalid: metadata.name: Required value")


def not_found(res: ResourceType, name: str) -> ApiError:
    group = f".{res.group}" if res.group else ""
    return ApiError(404, "NotFound", f'{res.plural}{group} "{name}" not found',
                    {"name": name, "kind": res.plural, "group": res.group})


def conflict(res: ResourceType, name: str) -> ApiError:
    group = f".{res.group}" if res.group else ""
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {res.plural}{group} '
                    f'"{name}": the object has been modified; please apply your changes to the '
                    "latest version and try again", {"name": name, "kind": res.plural})
