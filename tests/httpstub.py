"""A tiny threaded HTTP stub on 127.0.0.1 for tests of HTTP clients (Prometheus, Triton)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def send_json(handler: BaseHTTPRequestHandler, code: int, data: bytes) -> None:
    """Reply ``code`` with ``data`` as an application/json body."""
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """Start ``handler`` on a free loopback port in a daemon thread; shut it down when done."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    return httpd
