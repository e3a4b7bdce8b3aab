"""Triton explicit model control through the real tritonclient, against a small HTTP fake of
Triton's model-repository endpoints on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from controlplane.adapters.k8s.triton import TritonModelControl
from controlplane.domain.errors import TransientError
from tests.httpstub import send_json, serve


class FakeTriton:
    """``POST v2/repository/index``, ``POST v2/repository/models/<m>/load|unload``."""

    def __init__(self, repository: set[str]) -> None:
        self.repository = repository
        self.loaded: set[str] = set()
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                code, payload = fake.handle(self.path, body)
                send_json(self, code, json.dumps(payload).encode())

        self.httpd = serve(Handler)

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if parts == ["v2", "repository", "index"]:
            return 200, [{"name": m, "version": "1",
                          "state": "READY" if m in self.loaded else "UNAVAILABLE"}
                         for m in sorted(self.repository)]
        if parts[:3] == ["v2", "repository", "models"] and len(parts) == 5:
            model, verb = parts[3], parts[4]
            self.calls.append((verb, model, body))
            if model not in self.repository:
                return 400, {"error": f"failed to {verb} '{model}', no version is available"}
            (self.loaded.add if verb == "load" else self.loaded.discard)(model)
            return 200, {}
        return 404, {"error": "not found"}


@pytest.fixture
def triton() -> Iterator[FakeTriton]:
    fake = FakeTriton({"resnet50", "bert-large"})
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


def test_load_and_unload_change_what_the_repository_reports(triton: FakeTriton) -> None:
    control = TritonModelControl(triton.url)
    assert control.repository() == {"bert-large": "UNAVAILABLE", "resnet50": "UNAVAILABLE"}
    loaded = control.load_model("resnet50")
    assert loaded.ok and loaded.message.endswith("loaded resnet50")
    assert control.repository()["resnet50"] == "READY"
    assert control.unload_model("resnet50").ok
    assert control.repository()["resnet50"] == "UNAVAILABLE"
    assert [(verb, model) for verb, model, _ in triton.calls] == [("load", "resnet50"),
                                                                  ("unload", "resnet50")]


def test_loading_twice_is_idempotent(triton: FakeTriton) -> None:
    control = TritonModelControl(triton.url)
    assert control.load_model("bert-large").ok and control.load_model("bert-large").ok
    assert triton.loaded == {"bert-large"}


def test_an_unknown_model_fails_with_tritons_message_and_no_retry(triton: FakeTriton) -> None:
    outcome = TritonModelControl(triton.url).load_model("ghost")
    assert not outcome.ok and not outcome.retryable
    assert "no version is available" in outcome.message


def test_an_unreachable_server_is_retryable(triton: FakeTriton) -> None:
    triton.httpd.shutdown()
    triton.httpd.server_close()
    control = TritonModelControl(triton.url, timeout_s=2)
    outcome = control.load_model("resnet50")
    assert not outcome.ok and outcome.retryable and "unreachable" in outcome.message
    with pytest.raises(TransientError, match="unreachable"):
        control.repository()
