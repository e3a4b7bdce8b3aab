"""The Prometheus source against a real Prometheus (Debian package) with backfilled history."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.forecast import app
from forecaster.errors import SourceError
from forecaster.sources.prometheus import PrometheusSource
from tests.forecasting.promserver import OPS_HASH, Family, free_port, prometheus

pytestmark = pytest.mark.prometheus
END = int(time.time()) // 3600 * 3600 - 3600  # whole hour, an hour ago
START = END - 12 * 3600
GAP = (START + 6 * 3600, START + 7 * 3600)  # no samples for an hour


def true_rate(model: str, t: float) -> float:
    base = 20.0 if model == "m1" else 5.0
    return base * (1 + 0.5 * math.sin(2 * math.pi * t / 86_400))


def counter(model: str, interval_s: int = 15) -> list[tuple[float, float]]:
    total, out = 0.0, []
    for t in range(START, END + 1, interval_s):
        total += true_rate(model, t) * interval_s
        out.append((float(t), total))
    return out


def gauge(model: str) -> list[tuple[float, float]]:
    return [(float(t), round(true_rate(model, t), 3)) for t in range(START, END + 1, 60)
            if not GAP[0] <= t < GAP[1]]


def retired() -> list[tuple[float, float]]:
    """A vLLM model taken out of the fleet three days before START: Prometheus keeps its series
    (and its label value) for the whole retention."""
    return [(float(t), 10.0 * (t - START)) for t in range(START - 4 * 86_400,
                                                         START - 3 * 86_400, 60)]


def dip() -> list[tuple[float, float]]:
    """m2's gauge with the last three samples of the first hour negative."""
    return [(t, -1.0 if START + 57 * 60 <= t < START + 3600 else v) for t, v in gauge("m2")]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    families = [
        Family("nv_inference_request_success",
               {'model="m1",version="1"': counter("m1"), 'model="m2",version="1"': counter("m2")}),
        Family("vllm:request_success_total", {'model_name="llama"': counter("m1"),
                                               'model_name="retired"': retired()}),
        Family("headroom_test_rate", {'model="m1"': gauge("m1"), 'model="m2"': gauge("m2"),
                                      'model="neg"': [(t, -v) for t, v in gauge("m1")],
                                      'model="dip"': dip()}),
    ]
    with prometheus(tmp_path_factory.mktemp("prom"), families) as url:
        yield url


def at(t: int) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def test_custom_query_returns_the_backfilled_values_on_the_step_grid(prom_url: str) -> None:
    src = PrometheusSource(prom_url, query='headroom_test_rate{model="{model}"}',
                           models=["m1", "m2"])
    s = src.rate_history("m2", at(START), at(START + 3600), 60)
    assert s.step_s == 60 and len(s.values) == 60
    assert s.values[0] == pytest.approx(round(true_rate("m2", START), 3))
    assert s.values[59] == pytest.approx(round(true_rate("m2", START + 59 * 60), 3))


def test_a_gap_in_prometheus_is_missing_data_not_zero(prom_url: str) -> None:
    src = PrometheusSource(prom_url, query='headroom_test_rate{model="{model}"}', models=["m1"])
    s = src.rate_history("m1", at(GAP[0] - 600), at(GAP[1] + 600), 60)
    inside = s.values[20:50]  # 10..40 minutes into the gap (past the 5-minute lookback)
    assert all(math.isnan(v) for v in inside)
    assert not any(v == 0.0 for v in s.values)


def test_triton_preset_discovers_models_and_reads_their_request_rate(prom_url: str) -> None:
    src = PrometheusSource(prom_url, preset="triton")
    assert src.model_names() == ["m1", "m2"]
    s = src.rate_history("m1", at(END - 3600), at(END), 60)
    for i in (10, 30, 59):
        t = END - 3600 + i * 60
        assert s.values[i] == pytest.approx(true_rate("m1", t), rel=0.02)


def test_vllm_preset_reads_the_vllm_counter(prom_url: str) -> None:
    s = PrometheusSource(prom_url, preset="vllm").rate_history("llama", at(END - 600), at(END),
                                                               60)
    assert s.values[-1] == pytest.approx(true_rate("m1", END - 60), rel=0.02)


def test_a_model_without_data_is_named_in_the_error(prom_url: str) -> None:
    src = PrometheusSource(prom_url, preset="triton")
    with pytest.raises(SourceError, match="returned no data for model 'ghost'"):
        src.rate_history("ghost", at(END - 3600), at(END), 60)


def test_a_rejected_query_is_reported_with_the_query(prom_url: str) -> None:
    src = PrometheusSource(prom_url, query="sum(rate(x{model=\"{model}\"}[oops]))", models=["m1"])
    with pytest.raises(SourceError, match="rejected the query for model 'm1'"):
        src.rate_history("m1", at(END - 3600), at(END), 60)


def test_a_prometheus_that_is_down_is_named_in_the_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    src = PrometheusSource(url, preset="triton", timeout_s=2)
    with pytest.raises(SourceError, match=f"Prometheus at {url} is unreachable"):
        src.model_names()


def test_forecast_run_reads_prometheus_and_forecasts_every_model(prom_url: str,
                                                                 tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "run", "--prometheus-url", prom_url, "--metric", "triton", "--no-store", "--json",
        "--method", "level", "--step", "60s", "--history", "11h", "--workers", "1",
        "--at", at(END).isoformat(), "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["forecasts"] == 2 and doc["failed"] == {}
    m1 = doc["per_model"]["m1"]
    assert m1["method"] in ("level", "persistence", "hour_mean")
    assert m1["p50_last"] == pytest.approx(true_rate("m1", END + 1200), rel=0.1)


def test_forecast_run_forecasts_a_model_named_twice_in_models_once(prom_url: str,
                                                                   tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "run", "--prometheus-url", prom_url, "--metric", "triton", "--models", "m1, m1",
        "--no-store", "--json", "--method", "persistence", "--history", "1h", "--workers", "1",
        "--at", at(END).isoformat(), "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["models"] == 1 and doc["forecasts"] == 1 and list(doc["per_model"]) == ["m1"]


def test_forecast_run_discovers_only_the_models_with_samples_in_its_history_window(
        prom_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "run", "--prometheus-url", prom_url, "--metric", "vllm", "--no-store", "--json",
        "--method", "persistence", "--history", "11h", "--workers", "1",
        "--at", at(END).isoformat(), "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output  # the retired model is no failure of the run
    doc = json.loads(result.stdout)
    assert doc["models"] == 1 and list(doc["per_model"]) == ["llama"] and doc["failed"] == {}
    later = PrometheusSource(prom_url, preset="vllm")
    assert later.model_names() == ["llama", "retired"]  # all the retention, without a window


def test_forecast_run_with_prometheus_down_exits_2_with_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, ["run", "--prometheus-url", url, "--no-store",
                                      "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert f"Prometheus at {url} is unreachable" in result.output
    assert "Traceback" not in result.output


GAUGE = 'headroom_test_rate{model="{model}"}'


def test_negative_samples_are_clipped_with_a_warning_naming_how_many_and_the_last(
        prom_url: str) -> None:
    src = PrometheusSource(prom_url, query=GAUGE, models=["dip"])
    got = src.read_history("dip", at(START), at(START + 3600), 60)
    assert got.warnings == ("3 negative value(s) clipped to 0, the last observation among them "
                            f"(-1 at {at(START + 59 * 60).isoformat()}): the forecast starts "
                            "from a last observation of 0",)
    assert got.series.values[57:] == (0.0, 0.0, 0.0)
    assert got.series.values[56] == pytest.approx(round(true_rate("m2", START + 56 * 60), 3))


def test_forecast_run_gives_a_model_with_only_negative_samples_no_forecast_not_a_zero(
        prom_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "run", "--prometheus-url", prom_url, "--query", GAUGE, "--models", "neg,m1",
        "--no-store", "--json", "--method", "persistence", "--history", "2h", "--workers", "1",
        "--at", at(END).isoformat(), "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert list(doc["per_model"]) == ["m1"] and doc["per_model"]["m1"]["warnings"] == []
    assert "returned no usable value for model 'neg'" in doc["failed"]["neg"]
    assert "numeric value(s) are negative: bad data (a wrong metric or sign?), not zero " \
        "traffic" in doc["failed"]["neg"]
    assert "warning: model 'neg'" in result.stderr


def test_forecast_run_flags_a_model_whose_data_ended_three_days_ago_as_stale(
        prom_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "run", "--prometheus-url", prom_url, "--query", GAUGE, "--models", "m2",
        "--no-store", "--json", "--method", "persistence", "--history", "4d", "--workers", "1",
        "--at", at(END + 72 * 3600).isoformat(), "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output
    (warning,) = json.loads(result.stdout)["per_model"]["m2"]["warnings"]
    assert re.fullmatch(r"stale_history: last sample 7[12]\.\d h before the forecast time "
                        r"\(at .*; limit 1 h\)", warning), warning
    assert "warning: model 'm2': stale_history: last sample" in result.stderr



@pytest.fixture(scope="module")
def guarded_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Prometheus under the path /prom behind basic auth (user ops); the URL has no credentials."""
    families = [Family("nv_inference_request_success", {'model="m1",version="1"': counter("m1")})]
    with prometheus(tmp_path_factory.mktemp("guarded"), families, route_prefix="/prom",
                    basic_auth=("ops", OPS_HASH)) as url:
        yield url


def test_forecast_run_reads_prometheus_under_a_path_prefix_with_basic_auth_in_the_url(
        guarded_url: str, tmp_path: Path) -> None:
    url = guarded_url.replace("http://", "http://ops:s3cret@") + "/"
    result = CliRunner().invoke(app, [
        "run", "--prometheus-url", url, "--no-store", "--json", "--method", "level",
        "--history", "11h", "--workers", "1", "--at", at(END).isoformat(),
        "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["failed"] == {} and doc["forecasts"] == 1
    assert doc["per_model"]["m1"]["p50_last"] == pytest.approx(true_rate("m1", END + 1200),
                                                               rel=0.1)


def test_prometheus_errors_show_the_url_without_its_password(guarded_url: str,
                                                               tmp_path: Path) -> None:
    shown = guarded_url.replace("http://", "http://ops:***@")
    refused = CliRunner().invoke(app, [
        "run", "--prometheus-url", guarded_url.replace("http://", "http://ops:wrong-pw@"),
        "--no-store", "--state-dir", str(tmp_path / "state")])
    assert refused.exit_code == 2
    assert f"Prometheus at {shown} is unreachable or refused the label query" in refused.stderr
    assert "401" in refused.stderr and "wrong-pw" not in refused.output
    down = f"http://ops:wrong-pw@127.0.0.1:{free_port()}/prom"
    src = PrometheusSource(down, models=["m1"], timeout_s=2)
    with pytest.raises(SourceError) as unreachable:
        src.read_history("m1", at(START), at(END), 60)
    assert "ops:***@127.0.0.1" in str(unreachable.value)
    assert "wrong-pw" not in str(unreachable.value)
    missing = CliRunner().invoke(app, [
        "run", "--prometheus-url", guarded_url.replace("http://", "http://ops:s3cret@"),
        "--models", "m1,nope", "--no-store", "--history", "11h", "--workers", "1",
        "--at", at(END).isoformat(), "--state-dir", str(tmp_path / "state")])
    assert missing.exit_code == 1
    assert f"model 'nope': history unavailable: Prometheus at {shown} returned no data" \
        in missing.stderr
    assert "s3cret" not in missing.output


def _auth_config(tmp_path: Path, **prometheus: str) -> str:
    config = tmp_path / "headroom.yaml"
    config.write_text(json.dumps({"prometheus": prometheus}))  # JSON is YAML
    return str(config)


def test_forecast_run_takes_basic_auth_from_the_settings_not_only_the_url(
        guarded_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "run", "--prometheus-url", guarded_url, "--config",
        _auth_config(tmp_path, username="ops", password="s3cret"), "--no-store", "--json",
        "--method", "level", "--history", "11h", "--workers", "1", "--at", at(END).isoformat(),
        "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["forecasts"] == 1


def test_a_wrong_password_in_the_settings_is_refused_on_one_line_without_the_password(
        guarded_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "run", "--prometheus-url", guarded_url, "--config",
        _auth_config(tmp_path, username="ops", password="wrong-pw"), "--no-store",
        "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert f"Prometheus at {guarded_url} is unreachable or refused the label query: HTTP " \
           "Status Code 401" in result.stderr
    assert "the credentials were refused (check the username and password or the token)" \
        in result.stderr
    assert "wrong-pw" not in result.output


def test_basic_auth_both_in_the_url_and_the_settings_is_refused_naming_neither_password(
        guarded_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "run", "--prometheus-url", guarded_url.replace("http://", "http://ops:url-pw@"),
        "--config", _auth_config(tmp_path, username="ops", password="file-pw"), "--no-store",
        "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert "credentials both in the URL and as username/password; give them once" \
        in result.stderr
    assert "url-pw" not in result.output and "file-pw" not in result.output
