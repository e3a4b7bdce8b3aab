"""A Kubernetes API test server over real HTTP on 127.0.0.1 (a test double, not a cluster).

It speaks enough of the REST API for the official ``kubernetes`` client: GET/LIST (label and field
selectors), POST, PUT, PATCH (merge, strategic merge, JSON patch, server-side apply), DELETE, the
``status``, ``scale`` and ``eviction`` subresources; 404, 409 (resourceVersion and field-manager
conflicts), 422 (schema validation with kubernetes-validate) and 429 (disruption budgets).
Nothing runs controllers: tests play kubelet, scheduler or MIG manager through ``seed`` and
``set_status``. ``inject_fault`` answers a request with an error; ``hold`` keeps one in flight
(a slow API server) until the test releases it.
"""

from __future__ import annotations

import builtins
import json
import select
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from . import policy
from .objects import ApiError, ObjectStore
from .patching import PatchError, json_patch, merge_patch, strategic_merge_patch
from .resources import BY_KIND, ResourceType, Route, RouteError, parse_path
from .scale import read_scale, write_scale
from .selectors import parse_field_selector, parse_label_selector

PATCHERS = {
    "application/merge-patch+json": merge_patch,
    "application/strategic-merge-patch+json": strategic_merge_patch,
    "application/json-patch+json": json_patch,
}
APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True, slots=True)
class RequestRecord:
    method: str
    path: str
    query: str
    content_type: str
    field_manager: str
    status: int

    @property
    def is_write(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE")


@dataclass(slots=True)
class Fault:
    method: str
    path_contains: str
    code: int
    remaining: int


@dataclass(slots=True)
class Hold:
    """A request held before it is applied, as a slow API server holds it (``ApiServer.hold``)."""

    method: str
    path_contains: str
    holding: threading.Event = field(default_factory=threading.Event)  # one arrived, is held
    released: threading.Event = field(default_factory=threading.Event)
    handled: threading.Event = field(default_factory=threading.Event)  # applied or dropped
    taken: bool = False

    def release(self) -> None:
        self.released.set()


class _QuietOnHangUp(ThreadingHTTPServer):
    """A client that hangs up (a killed ``headroom serve`` resetting its idle keep-alive
    connection) is not a server error; anything else is still printed."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            super().handle_error(request, client_address)


class ApiServer:
    def __init__(self) -> None:
        self.store = ObjectStore()
        policy.install(self.store)
        self.requests: list[RequestRecord] = []
        self._faults: list[Fault] = []
        self._holds: list[Hold] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> ApiServer:
        server = self

        class Handler(_Handler):
            api = server

        self._httpd = _QuietOnHangUp(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True, name="k8s-test-apiserver")
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            for hold in self._holds:
                hold.release()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- helpers for tests (in-process; they validate like HTTP writes do) ----------------
    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` as it would look after controllers ran (status kept)."""
        res = _resource_of(obj)
        namespace = obj["metadata"].get("namespace", "") if res.namespaced else ""
        return self.store.create(res, namespace, obj, "test-seed", keep_status=True)

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        return self.store.get(BY_KIND[(api_version, kind)], namespace, name)

    def find(self, api_version: str, kind: str, name: str, namespace: str = "") -> dict[
            str, Any] | None:
        try:
            return self.get(api_version, kind, name, namespace)
        except ApiError:
            return None

    def list(self, api_version: str, kind: str, namespace: str = "") -> list[dict[str, Any]]:
        items, _ = self.store.list(BY_KIND[(api_version, kind)], namespace, lambda _: True)
        return items

    def set_status(self, api_version: str, kind: str, name: str, status: dict[str, Any],
                   namespace: str = "") -> dict[str, Any]:
        res = BY_KIND[(api_version, kind)]
        with self.store.lock:
            obj = self.store.get(res, namespace, name)
            obj["status"] = status
            return self.store.replace(res, namespace, name, obj, "test-controller", "status")

    def update(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
               namespace: str = "", manager: str = "test-controller") -> dict[str, Any]:
        """Merge-patch an object as another controller would (e.g. the MIG manager)."""
        res = BY_KIND[(api_version, kind)]
        with self.store.lock:
            obj = self.store.get(res, namespace, name)
            return self.store.replace(res, namespace, name, merge_patch(obj, patch), manager)

    def delete(self, api_version: str, kind: str, name: str, namespace: str = "") -> None:
        self.store.delete(BY_KIND[(api_version, kind)], namespace, name)

    def inject_fault(self, method: str, path_contains: str, code: int, times: int = 1) -> None:
        """Answer the next ``times`` matching requests with ``code`` (before doing anything)."""
        with self._lock:
            self._faults.append(Fault(method, path_contains, code, times))

    def hold(self, method: str, path_contains: str) -> Hold:
        """Hold the next matching request, before anything is done with it, until the test
        calls ``release()`` (off unless asked for). A held request whose client hung up in the
        meantime is then dropped, not applied, and recorded with status 499, as the API server
        cancels a request whose client went away before it was stored."""
        hold = Hold(method, path_contains)
        with self._lock:
            self._holds.append(hold)
        return hold

    def writes(self) -> builtins.list[RequestRecord]:  # ``list`` is the method above
        with self._lock:
            return [r for r in self.requests if r.is_write]

    def _take_fault(self, method: str, path: str) -> int | None:
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.method == method and fault.path_contains in path:
                    fault.remaining -= 1
                    return fault.code
        return None

    def _take_hold(self, method: str, path: str) -> Hold | None:
        with self._lock:
            for hold in self._holds:
                if not hold.taken and hold.method == method and hold.path_contains in path:
                    hold.taken = True
                    return hold
        return None

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            self.requests.append(record)


def _resource_of(obj: dict[str, Any]) -> ResourceType:
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key not in BY_KIND:
        raise ApiError(400, "BadRequest", f"unknown kind {key[1]} in {key[0]}")
    return BY_KIND[key]


class _Handler(BaseHTTPRequestHandler):
    api: ApiServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: avoid 40 ms stalls

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        manager = query.get("fieldManager") or (self.headers.get("User-Agent") or "unknown"
                                                ).split("/")[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        hold = self.api._take_hold(method, split.path)
        if hold is not None:
            hold.holding.set()
            hold.released.wait()
            if self._client_gone():
                self.api._record(RequestRecord(method, split.path, split.query, content_type,
                                               query.get("fieldManager", ""), 499))
                self.close_connection = True
                hold.handled.set()
                return
        try:
            fault = self.api._take_fault(method, split.path)
            if fault is not None:
                raise ApiError(fault, "InternalError" if fault >= 500 else "Injected",
                               f"injected fault {fault}")
            code, payload = self._dispatch(method, split.path, query, content_type, manager, raw)
        except ApiError as error:
            code, payload = error.code, error.status()
        except (RouteError, PatchError) as error:
            code = getattr(error, "code", 404)
            reason = "NotFound" if code == 404 else ("Invalid" if code == 422 else "BadRequest")
            payload = ApiError(code, reason, str(error)).status()
        except (ValueError, yaml.YAMLError) as error:
            code, payload = 400, ApiError(400, "BadRequest", f"malformed body: {error}").status()
        self.api._record(RequestRecord(method, split.path, split.query, content_type,
                                       query.get("fieldManager", ""), code))
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if hold is not None:
            hold.handled.set()

    def _client_gone(self) -> bool:
        """Whether the client closed its end (it stopped waiting for the answer)."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except OSError:
            return True

    def _dispatch(self, method: str, path: str, query: dict[str, str], content_type: str,
                  manager: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        if "dryRun" in query or "watch" in query:
            raise ApiError(400, "BadRequest", "dryRun and watch are not supported here")
        route = parse_path(path)
        store = self.api.store
        if route.subresource == "scale":
            return self._scale(method, route, content_type, manager, raw)
        if route.subresource == "eviction":
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "eviction accepts POST only")
            return 201, policy.evict(store, route.namespace, route.name, _json(raw))
        res = route.resource
        if method == "GET" and not route.name:
            return 200, self._list(route, query)
        if method == "GET":
            return 200, store.get(res, route.namespace, route.name)
        if method == "POST" and not route.name:
            return 201, store.create(res, route.namespace, _json(raw), manager)
        if method == "PUT" and route.name:
            return 200, store.replace(res, route.namespace, route.name, _json(raw), manager,
                                      route.subresource)
        if method == "PATCH" and route.name:
            return self._patch(route, query, content_type, manager, raw)
        if method == "DELETE" and route.name:
            return 200, store.delete(res, route.namespace, route.name)
        raise ApiError(405, "MethodNotAllowed", f"{method} not allowed on {path}")

    def _list(self, route: Route, query: dict[str, str]) -> dict[str, Any]:
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""))
        items, rv = self.api.store.list(
            route.resource, route.namespace,
            lambda o: labels(o["metadata"].get("labels") or {}) and fields(o))
        for item in items:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        return {"kind": f"{route.resource.kind}List", "apiVersion": route.resource.api_version,
                "metadata": {"resourceVersion": rv}, "items": items}

    def _patch(self, route: Route, query: dict[str, str], content_type: str, manager: str,
               raw: bytes) -> tuple[int, dict[str, Any]]:
        store, res = self.api.store, route.resource
        if content_type == APPLY:
            if not query.get("fieldManager"):
                raise ApiError(400, "BadRequest", "PATCH with apply requires fieldManager")
            body = yaml.safe_load(raw.decode() or "{}")
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "apply body must be an object")
            existed = store.exists(res, route.namespace, route.name)
            obj = store.apply(res, route.namespace, route.name, body, query["fieldManager"],
                              query.get("force") == "true")
            return (200 if existed else 201), obj
        if query.get("force"):
            raise ApiError(400, "BadRequest", "force is only allowed for apply patches")
        patcher = PATCHERS.get(content_type)
        if patcher is None:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
        with store.lock:
            current = store.get(res, route.namespace, route.name)
            patched = patcher(current, _json(raw))
            return 200, store.replace(res, route.namespace, route.name, patched, manager,
                                      route.subresource)

    def _scale(self, method: str, route: Route, content_type: str, manager: str,
               raw: bytes) -> tuple[int, dict[str, Any]]:
        store, res = self.api.store, route.resource
        with store.lock:
            obj = store.get(res, route.namespace, route.name)
            if method == "GET":
                return 200, read_scale(obj)
            if method == "PUT":
                scale = _json(raw)
            elif method == "PATCH" and content_type in PATCHERS:
                scale = PATCHERS[content_type](read_scale(obj), _json(raw))
            else:
                raise ApiError(415 if method == "PATCH" else 405, "BadRequest",
                               f"{method} {content_type} not supported on scale")
            updated = write_scale(obj, scale)
            store.replace(res, route.namespace, route.name, updated, manager)
            return 200, read_scale(store.get(res, route.namespace, route.name))


def _json(raw: bytes) -> Any:
    return json.loads(raw.decode() or "{}")
