"""``prometheus.url`` (and ``forecast run --prometheus-url``) is an http(s) URL of a host,
checked when it is given: a URL without its scheme is one line naming it, not "unreachable (No
host specified.)" when Prometheus is first asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.forecast import app
from controlplane.settings import ConfigError, load_settings


@pytest.mark.parametrize(("url", "problem"), [
    ("127.0.0.1:9090", "'127.0.0.1:9090' is not a URL: give the scheme, e.g. "
                       "http://127.0.0.1:9090"),
    ("localhost:9090", "'localhost:9090' is not a URL: give the scheme, e.g. "
                       "http://localhost:9090"),
    ("ftp://prometheus", "'ftp://prometheus': the scheme must be http or https, not 'ftp'"),
    ("http://:9090", "'http://:9090' names no host, e.g. http://127.0.0.1:9090"),
    ("http://prometheus:99999", "'http://prometheus:99999': Port out of range 0-65535"),
], ids=["an address without a scheme", "a host name without a scheme", "another scheme",
        "no host", "a port out of range"])
def test_a_prometheus_url_that_is_no_http_url_is_one_line_naming_the_file_and_setting(
        tmp_path: Path, url: str, problem: str) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"prometheus:\n  url: '{url}'\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert str(caught.value) == f"{config}: prometheus.url: Value error, {problem}"


def test_a_prometheus_url_from_the_environment_is_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_PROMETHEUS__URL", "127.0.0.1:9090")
    with pytest.raises(ConfigError, match=r"^environment variable HEADROOM_PROMETHEUS__URL: "
                                          r"prometheus\.url: Value error, '127\.0\.0\.1:9090'"):
        load_settings(None)


def test_a_refused_prometheus_url_never_shows_its_password() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, prometheus={"url": "http://ops:s3cret@:9090"})
    assert "s3cret" not in str(caught.value) and "'http://ops:***@:9090'" in str(caught.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9090", "https://ops:pw@prom.example/prom",
                                 "http://[::1]:9090", "HTTP://prometheus"])
def test_http_and_https_urls_of_a_host_load(url: str) -> None:
    assert load_settings(None, prometheus={"url": url}).prometheus.url == url


def test_forecast_run_refuses_a_bad_prometheus_url_in_its_config_file_with_exit_2(
        tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("prometheus:\n  url: 127.0.0.1:9090\n")
    result = CliRunner().invoke(app, ["run", "-c", str(config), "--no-store",
                                      "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert f"{config}: prometheus.url: Value error, '127.0.0.1:9090' is not a URL" \
        in result.output


def test_forecast_run_refuses_a_prometheus_url_option_without_a_scheme_naming_the_option(
        tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--prometheus-url", "127.0.0.1:9090", "--no-store",
                                      "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "--prometheus-url: '127.0.0.1:9090' is not a URL: give the scheme" in result.output
    assert "unreachable" not in result.output
