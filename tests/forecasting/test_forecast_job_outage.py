"""The forecast job and the tick's per-model queries over a Prometheus that is down or slower
than ``timeout_s``: one request, not retried, then the remaining models are not asked (named,
with the reason), so a run costs about one timeout, not several per model; a timeout reads as
such, not as "unreachable"."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from controlplane.forecast_job import JobConfig, run_job
from forecaster.sources.prometheus import PrometheusSource
from tests.forecasting.promserver import free_port
from tests.httpstub import send_json, serve

MODELS = [f"m{i}" for i in range(5)]
EMPTY_MATRIX = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'


class SlowPrometheus:
    """Answers every request after ``delay_s`` (an overloaded Prometheus) and records each
    request's path and query parameters."""

    def __init__(self, delay_s: float) -> None:
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.released = threading.Event()
        slow = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                slow.requests.append((parts.path, parse_qs(parts.query)))
                slow.released.wait(delay_s)
                with contextlib.suppress(OSError):  # the client gave up
                    send_json(self, 200, EMPTY_MATRIX)

        self.httpd = serve(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def slow() -> Iterator[SlowPrometheus]:
    server = SlowPrometheus(delay_s=3.0)
    try:
        yield server
    finally:
        server.released.set()
        server.httpd.shutdown()
        server.httpd.server_close()


def now() -> datetime:
    return datetime.fromtimestamp(int(time.time()) // 60 * 60, UTC)


def test_a_forecast_run_against_a_prometheus_slower_than_its_timeout_costs_about_one_timeout(
        slow: SlowPrometheus) -> None:
    src = PrometheusSource(slow.url, "triton", models=MODELS, timeout_s=1)
    started = time.monotonic()
    report = run_job(src, None, now(), JobConfig(history_s=86_400))
    assert time.monotonic() - started < 2.5  # one timeout, not 4 tries x 5 models
    assert len(slow.requests) <= 2
    assert sorted(report.failed) == MODELS
    first = f"Prometheus at {slow.url} did not answer within 1 s (prometheus.timeout_s); " \
            "no history for model 'm0'"
    assert report.failed["m0"] == f"history unavailable: {first}"
    assert all(report.failed[m] == f"history unavailable: not asked, an earlier request "
                                   f"failed: {first}" for m in MODELS[1:])


def test_a_range_query_asks_prometheus_to_stop_evaluating_at_the_clients_timeout(
        slow: SlowPrometheus) -> None:
    src = PrometheusSource(slow.url, "triton", models=["m0"], timeout_s=1)
    run_job(src, None, now(), JobConfig(history_s=86_400))
    path, params = slow.requests[0]
    assert path == "/api/v1/query_range"
    assert params["timeout"] == ["1"]


def test_a_forecast_run_against_a_refused_connection_tries_once_and_names_every_model(
        caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    src = PrometheusSource(url, "triton", models=MODELS, timeout_s=2)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="urllib3"):
        report = run_job(src, None, now(), JobConfig(history_s=86_400))
    assert time.monotonic() - started < 1.0  # no retry, no backoff
    assert [r.getMessage() for r in caplog.records if "Retrying" in r.getMessage()] == []
    assert sorted(report.failed) == MODELS
    assert report.failed["m0"].startswith(f"history unavailable: Prometheus at {url} is "
                                          "unreachable (")
    assert report.failed["m0"].endswith("Connection refused); no history for model 'm0'")
    assert all(report.failed[m] == "history unavailable: not asked, an earlier request failed: "
                                   + report.failed["m0"].removeprefix("history unavailable: ")
               for m in MODELS[1:])


def test_the_current_rates_of_a_slow_prometheus_say_it_did_not_answer_in_time(
        slow: SlowPrometheus) -> None:
    src = PrometheusSource(slow.url, query='sum(rate(x{model="{model}"}[{window}]))',
                           models=MODELS, timeout_s=1)
    started = time.monotonic()
    got = src.current_rates(MODELS, now())
    assert time.monotonic() - started < 2.5
    assert len(slow.requests) == 1
    assert slow.requests[0][1]["timeout"] == ["1"]
    first = f"Prometheus at {slow.url} did not answer within 1 s (prometheus.timeout_s)"
    assert got.rates == {}
    assert got.unknown == {"m0": first} | {
        m: f"not asked, an earlier request failed: {first}" for m in MODELS[1:]}
