"""``current_rates`` of a preset asks two instant queries: the rates, and the time of the newest
sample behind each (``max_over_time(timestamp(...))``). When the second fails, or does not name a
model the first measured, the rates stand without a sample time, and the log says why (a tiny
local HTTP server plays a Prometheus whose sample-time query fails)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from forecaster.sources.prometheus import PrometheusSource
from tests.httpstub import send_json, serve

AT = datetime(2025, 3, 6, 12, 0, tzinfo=UTC)


class SplitPrometheus:
    """Answers the grouped rate query with ``rates`` and the sample-time query with
    ``sample_times`` (a dict label -> unix s), or with HTTP ``sample_time_status`` when set."""

    def __init__(self) -> None:
        self.rates: dict[str, float] = {"m1": 5.0, "m2": 3.0}
        self.sample_times: dict[str, float] = {}
        self.sample_time_status: int | None = 503
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self.reply(parse_qs(urlsplit(self.path).query))

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.reply(parse_qs(body.decode()))

            def reply(self, params: dict[str, list[str]]) -> None:
                query = params.get("query", [""])[0]
                if "timestamp(" in query:
                    if fake.sample_time_status is not None:
                        error = {"status": "error", "errorType": "unavailable",
                                 "error": "sample-time query overloaded"}
                        send_json(self, fake.sample_time_status, json.dumps(error).encode())
                        return
                    values = fake.sample_times
                else:
                    values = fake.rates
                result = [{"metric": {"model": k}, "value": [AT.timestamp(), str(v)]}
                          for k, v in values.items()]
                data = {"status": "success", "data": {"resultType": "vector", "result": result}}
                send_json(self, 200, json.dumps(data).encode())

        self.httpd = serve(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def split() -> Iterator[SplitPrometheus]:
    server = SplitPrometheus()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_failed_sample_time_query_keeps_the_rates_and_logs_a_warning_with_the_error(
        split: SplitPrometheus, caplog: pytest.LogCaptureFixture) -> None:
    src = PrometheusSource(split.url, preset="triton", timeout_s=2)
    with caplog.at_level(logging.WARNING, logger="headroom"):
        got = src.current_rates(["m1", "m2"], AT)
    assert got.rates == {"m1": 5.0, "m2": 3.0}
    assert got.sampled_at == {}
    logged = warnings_of(caplog)
    assert len(logged) == 1
    assert logged[0].startswith(f"Prometheus at {split.url}: the newest-sample-time query "
                                "failed; the rates of 2 model(s) (m1, m2) are taken as of "
                                f"{AT.isoformat()}: ")
    assert "sample-time query overloaded" in logged[0]
    assert "max_over_time(timestamp(nv_inference_request_success)" in logged[0]


def test_a_sample_time_answer_missing_a_measured_model_is_logged_naming_the_model(
        split: SplitPrometheus, caplog: pytest.LogCaptureFixture) -> None:
    split.sample_time_status = None
    split.sample_times = {"m1": AT.timestamp() - 30}
    src = PrometheusSource(split.url, preset="triton", timeout_s=2)
    with caplog.at_level(logging.WARNING, logger="headroom"):
        got = src.current_rates(["m1", "m2"], AT)
    assert got.rates == {"m1": 5.0, "m2": 3.0}
    assert got.sampled_at == {"m1": AT.timestamp() - 30}
    assert warnings_of(caplog) == [
        f"Prometheus at {split.url}: the newest-sample-time query named no sample for 1 "
        f"measured model(s) (m2); their rates are taken as of {AT.isoformat()}"]


def test_agreeing_rate_and_sample_time_queries_log_nothing(
        split: SplitPrometheus, caplog: pytest.LogCaptureFixture) -> None:
    split.sample_time_status = None
    split.sample_times = {"m1": AT.timestamp() - 30, "m2": AT.timestamp() - 15}
    src = PrometheusSource(split.url, preset="triton", timeout_s=2)
    with caplog.at_level(logging.WARNING, logger="headroom"):
        got = src.current_rates(["m1", "m2"], AT)
    assert got.sampled_at == {"m1": AT.timestamp() - 30, "m2": AT.timestamp() - 15}
    assert warnings_of(caplog) == []
