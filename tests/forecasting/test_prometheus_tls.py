"""An https Prometheus (the Debian binary with a tls_server_config): its certificate is verified
by default, against prometheus.ca_file when given, and only skipped when the operator says so."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trustme

from controlplane.adapters.prometheus import prometheus_source
from controlplane.settings import ConfigError
from controlplane.settings_cluster import PrometheusSettings
from forecaster.errors import SourceError
from tests.forecasting.promserver import Family, prometheus

pytestmark = pytest.mark.prometheus
END = int(time.time()) // 60 * 60 - 600
START = END - 3600
RPS = 12.0


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def https_url(tmp_path_factory: pytest.TempPathFactory, ca: trustme.CA) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("tls")
    cert = ca.issue_cert("127.0.0.1")
    cert_file, key_file = tmp / "prom.crt", tmp / "prom.key"
    cert_file.write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
    key_file.write_bytes(cert.private_key_pem.bytes())
    samples = [(float(t), RPS * (t - START)) for t in range(START, END + 1, 15)]
    families = [Family("nv_inference_request_success", {'model="m1",version="1"': samples})]
    with prometheus(tmp, families, tls=(cert_file, key_file)) as url:
        yield url


def _at(t: int) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _history_mean(settings: PrometheusSettings) -> float:
    source = prometheus_source(settings, models=["m1"])
    values = [v for v in source.read_history("m1", _at(START + 600), _at(END), 60).series.values
              if v == v]
    return sum(values) / len(values)


def test_a_certificate_signed_by_an_unknown_ca_is_refused_by_default_saying_what_to_give(
        https_url: str) -> None:
    assert https_url.startswith("https://")
    with pytest.raises(SourceError) as err:
        _history_mean(PrometheusSettings(url=https_url))
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value)
    assert "give the CA file that signed it (prometheus.ca_file)" in str(err.value)


def test_the_ca_file_verifies_the_certificate_and_the_history_is_read(
        https_url: str, ca: trustme.CA, tmp_path: Path) -> None:
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(ca.cert_pem.bytes())
    assert _history_mean(PrometheusSettings(url=https_url, ca_file=ca_file)) == \
        pytest.approx(RPS, rel=0.02)


def test_the_certificate_of_another_ca_in_the_ca_file_is_still_refused(
        https_url: str, tmp_path: Path) -> None:
    other = tmp_path / "other.pem"
    other.write_bytes(trustme.CA().cert_pem.bytes())
    with pytest.raises(SourceError, match="CERTIFICATE_VERIFY_FAILED"):
        _history_mean(PrometheusSettings(url=https_url, ca_file=other))


def test_verification_is_skipped_only_when_the_operator_says_so(https_url: str) -> None:
    settings = PrometheusSettings(url=https_url, insecure_skip_verify=True)
    assert _history_mean(settings) == pytest.approx(RPS, rel=0.02)


def test_a_ca_file_that_is_missing_or_holds_no_certificate_is_named(tmp_path: Path) -> None:
    missing, junk = tmp_path / "missing.pem", tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    for path, problem in ((missing, "no such file"), (junk, "not a PEM CA bundle")):
        with pytest.raises(ConfigError) as err:
            prometheus_source(PrometheusSettings(url="https://127.0.0.1:1", ca_file=path))
        assert str(err.value).startswith(f"prometheus.ca_file {path}: {problem}")


def test_a_ca_file_and_skipping_verification_together_are_refused() -> None:
    with pytest.raises(ValueError, match="not both"):
        PrometheusSettings(url="https://p:9090", ca_file=Path("/ca.pem"),
                           insecure_skip_verify=True)
