"""A TLS handshake that fails is not retried: a certificate nobody trusts (or a server that is
no TLS server) stays so, and each try of urllib3's retries waited out its backoff (0 + 2 + 4 s)
before the operator saw the error, once per history read."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import requests

from forecaster.sources.prometheus_connection import prometheus_client


@pytest.fixture
def not_tls() -> Iterator[tuple[str, list[int]]]:
    """An https URL whose server accepts connections and answers the TLS handshake with plain
    text (an SSL error on the client's side); the list counts the connections accepted."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}", accepted
    listener.close()


def test_a_failed_tls_handshake_is_tried_once_even_with_retries_for_overloaded_answers(
        not_tls: tuple[str, list[int]]) -> None:
    url, accepted = not_tls
    client = prometheus_client(url, timeout_s=5.0, retries=3)
    with pytest.raises(requests.exceptions.SSLError):
        client.check_prometheus_connection()
    assert len(accepted) == 1  # before: 4, three retries after 0, 2 and 4 s
