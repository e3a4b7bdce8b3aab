"""The Prometheus source against a tiny local HTTP server that answers 200 with bodies a real
Prometheus never sends: each is a one-line ``unexpected response`` naming the URL and query,
never "unreachable", a Python error text or invented model names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from typer.testing import CliRunner

from controlplane.cli.forecast import app
from forecaster.errors import SourceError
from forecaster.sources.prometheus import PrometheusSource
from forecaster.sources.promql import PRESETS
from tests.httpstub import send_json, serve

UNTIL = datetime(2025, 3, 6, 12, 0, tzinfo=UTC)
SINCE = UNTIL - timedelta(hours=1)


class FakePrometheus:
    """Answers every label query with ``labels`` and every range query with ``matrix``
    (raw bytes, or anything JSON-serialisable), always with status 200; but the queries of a
    history's sample times (``timestamp(``) and counts (``count_over_time(``) as a series
    scraped every 15 s up to each step's end."""

    def __init__(self) -> None:
        self.labels: Any = {"status": "success", "data": ["m1"]}
        self.matrix: Any = {"status": "success", "data": {"resultType": "matrix", "result": []}}
        self.authorizations: list[str | None] = []  # the Authorization header of each request
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
                fake.authorizations.append(self.headers.get("Authorization"))
                query = params.get("query", [""])[0]
                payload = fake.labels if "/api/v1/label/" in self.path else fake.matrix
                if "timestamp(" in query or "count_over_time(" in query:
                    payload = scraped_throughout(params, "count_over_time(" in query)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                send_json(self, 200, data)

        self.httpd = serve(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def serve_values(self, values: Any) -> None:
        self.matrix = {"status": "success",
                       "data": {"resultType": "matrix", "result": [{"metric": {},
                                                                    "values": values}]}}


def scraped_throughout(params: dict[str, list[str]], count: bool) -> object:
    """A range query's reply of a series scraped every 15 s: at each time of its grid, the
    samples in a 120 s window (``count``) or the newest sample time (that time)."""
    start, end = (float(params[key][0]) for key in ("start", "end"))
    step_s = float(params["step"][0].rstrip("s"))
    times = [start + i * step_s for i in range(round((end - start) / step_s) + 1)]
    values = [[t, "8" if count else str(t)] for t in times]
    return {"status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}}


@pytest.fixture
def fake() -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


def grid(value: str, n: int = 60) -> list[list[object]]:
    """A preset's samples: step i's rate is evaluated at its end, SINCE + 60 (i + 1)."""
    return [[SINCE.timestamp() + 60 * (i + 1), value] for i in range(n)]


def read(fake: FakePrometheus) -> SourceError:
    src = PrometheusSource(fake.url, preset="triton", models=["m1"], timeout_s=5)
    with pytest.raises(SourceError) as caught:
        src.rate_history("m1", SINCE, UNTIL, 60)
    return caught.value


def test_a_label_reply_that_is_an_object_is_an_unexpected_response_not_model_names(
        fake: FakePrometheus) -> None:
    fake.labels = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    with pytest.raises(SourceError) as caught:
        PrometheusSource(fake.url, preset="triton").model_names()
    message = str(caught.value)
    assert message.startswith(f"Prometheus at {fake.url}: unexpected response to the label "
                              f"query {fake.url}/api/v1/label/model/values (expected a list of "
                              "names, got a JSON object")
    assert "\n" not in message


def test_forecast_run_with_an_object_for_label_values_exits_2_without_inventing_models(
        fake: FakePrometheus, tmp_path: Path) -> None:
    fake.labels = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    result = CliRunner().invoke(app, ["run", "--prometheus-url", fake.url, "--no-store",
                                      "--json", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "unexpected response to the label query" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.output


def test_a_non_json_label_reply_is_an_unexpected_response_not_unreachable(
        fake: FakePrometheus) -> None:
    fake.labels = b"<html>hello, not json"
    with pytest.raises(SourceError, match=r"unexpected response to the label query .* \(not "
                                          r"JSON: Expecting value") as caught:
        PrometheusSource(fake.url, preset="triton").model_names()
    assert "unreachable" not in str(caught.value)


def test_a_non_json_range_reply_is_an_unexpected_response_naming_the_query(
        fake: FakePrometheus) -> None:
    fake.matrix = b"<html>hello, not json"
    message = str(read(fake))
    assert message.startswith(f"Prometheus at {fake.url}: unexpected response to the range "
                              "query for model 'm1' (not JSON")
    assert message.endswith(PRESETS["triton"].arrivals("m1", 120))
    assert "unreachable" not in message


def test_a_json_reply_without_data_is_an_unexpected_response(fake: FakePrometheus) -> None:
    fake.matrix = {"status": "success"}
    assert "unexpected response to the range query for model 'm1' (not a Prometheus API " \
           "reply: KeyError 'data')" in str(read(fake))


def test_values_that_are_not_a_list_are_an_unexpected_response_not_python_text(
        fake: FakePrometheus) -> None:
    fake.serve_values("oops")
    message = str(read(fake))
    assert "unexpected response to the range query for model 'm1' (a series' values are a " \
           "string 'oops', expected a list of [time, value] pairs)" in message
    assert "unpack" not in message


def test_a_sample_without_a_value_is_an_unexpected_response_not_python_text(
        fake: FakePrometheus) -> None:
    fake.serve_values([[SINCE.timestamp()]])
    message = str(read(fake))
    assert f"(sample [{SINCE.timestamp()}] is not a [time, value] pair)" in message
    assert "not enough values to unpack" not in message


def test_a_text_sample_is_an_unexpected_response(fake: FakePrometheus) -> None:
    fake.serve_values(grid("busy"))
    assert f"(sample [{SINCE.timestamp() + 60}, 'busy'] is not a number)" in str(read(fake))


def test_forecast_run_lists_a_malformed_reply_as_a_one_line_failure(
        fake: FakePrometheus, tmp_path: Path) -> None:
    fake.serve_values("oops")
    result = CliRunner().invoke(app, ["run", "--prometheus-url", fake.url, "--no-store",
                                      "--json", "--at", UNTIL.isoformat(), "--history", "1h",
                                      "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    why = json.loads(result.stdout)["failed"]["m1"]
    assert why.startswith(f"history unavailable: Prometheus at {fake.url}: unexpected response")
    assert "\n" not in why


def test_only_nan_samples_are_no_usable_value_not_a_zero_forecast(fake: FakePrometheus) -> None:
    fake.serve_values(grid("NaN"))
    assert "returned no usable value for model 'm1'" in str(read(fake))
    assert "no numeric values (60 NaN/Inf sample(s) treated as missing)" in str(read(fake))


def test_only_negative_samples_are_no_usable_value_not_a_zero_forecast(
        fake: FakePrometheus) -> None:
    fake.serve_values(grid("-3"))
    message = str(read(fake))
    assert "returned no usable value for model 'm1'" in message
    assert "all 60 numeric value(s) are negative: bad data" in message


def test_some_negative_samples_are_clipped_with_a_warning_saying_the_forecast_starts_from_0(
        fake: FakePrometheus) -> None:
    fake.serve_values(grid("5", 57) + [[SINCE.timestamp() + 60 * i, "-2"] for i in (58, 59, 60)])
    got = PrometheusSource(fake.url, models=["m1"]).read_history("m1", SINCE, UNTIL, 60)
    assert got.warnings == ("3 negative value(s) clipped to 0, the last observation among them "
                            "(-2 at 2025-03-06T11:59:00+00:00): the forecast starts from a last "
                            "observation of 0",)
    assert got.series.values == (5.0,) * 57 + (0.0,) * 3


def test_negative_samples_before_the_last_observation_do_not_say_the_forecast_starts_from_0(
        fake: FakePrometheus) -> None:
    fake.serve_values(grid("5", 56) + [[SINCE.timestamp() + 60 * i, v]
                                       for i, v in ((57, "-2"), (58, "-2"), (59, "4"))])
    got = PrometheusSource(fake.url, models=["m1"]).read_history("m1", SINCE, UNTIL, 60)
    assert got.warnings == ("2 negative value(s) clipped to 0",)


def test_valid_samples_carry_no_warning(fake: FakePrometheus) -> None:
    fake.serve_values(grid("5"))
    got = PrometheusSource(fake.url, models=["m1"]).read_history("m1", SINCE, UNTIL, 60)
    assert got.warnings == () and got.series.values == (5.0,) * 60


def test_forecast_run_sends_the_bearer_token_read_from_the_settings_file(
        fake: FakePrometheus, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("tok-123\n")
    config = tmp_path / "headroom.yaml"
    config.write_text(f"prometheus:\n  bearer_token_file: {token}\n")
    fake.serve_values(grid("5"))
    result = CliRunner().invoke(app, ["run", "--prometheus-url", fake.url, "--config",
                                      str(config), "--no-store", "--json", "--method", "level",
                                      "--at", UNTIL.isoformat(), "--history", "1h",
                                      "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output
    assert fake.authorizations and set(fake.authorizations) == {"Bearer tok-123"}
    assert "tok-123" not in result.output


def test_a_missing_bearer_token_file_is_one_line_naming_the_file_and_setting(
        fake: FakePrometheus, tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"prometheus:\n  bearer_token_file: {tmp_path / 'nope'}\n")
    result = CliRunner().invoke(app, ["run", "--prometheus-url", fake.url, "--config",
                                      str(config), "--no-store", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert f"prometheus.bearer_token_file {tmp_path / 'nope'}: cannot read it (No such file " \
           "or directory)" in result.stderr
    assert fake.authorizations == []  # refused before asking Prometheus
