"""The placement group's transport security rules: what an address beyond loopback needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from controlplane.settings_placement import PlacementSettings
from scheduler.metrics import is_loopback

PEM = {"tls_cert_file": Path("/tls/tls.crt"), "tls_key_file": Path("/tls/tls.key")}


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.2.1", True), ("localhost", True), ("LocalHost", True),
    ("[::1]", True), ("0.0.0.0", False), ("[::]", False), ("10.0.0.7", False),
    ("headroom.example", False),
])
def test_only_loopback_hosts_count_as_this_machine_alone(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("extra", [
    {}, {**PEM}, {"token_file": Path("/token")}, {**PEM, "allow_insecure": False},
])
def test_an_address_beyond_loopback_without_tls_and_authentication_is_refused(
        extra: dict[str, object]) -> None:
    problem = PlacementSettings.model_validate({"listen": "0.0.0.0:50051", **extra}
                                               ).exposure_problem()
    assert problem is not None
    assert problem.startswith("placement.listen 0.0.0.0:50051 is reachable beyond this machine")


@pytest.mark.parametrize("extra", [
    {**PEM, "token_file": Path("/token")},
    {**PEM, "tls_client_ca_file": Path("/ca.pem")},
    {"allow_insecure": True},
])
def test_an_address_beyond_loopback_is_served_with_tls_and_a_token_or_client_ca_or_when_allowed(
        extra: dict[str, object]) -> None:
    assert PlacementSettings.model_validate({"listen": "0.0.0.0:50051", **extra}
                                            ).exposure_problem() is None


def test_loopback_needs_nothing_as_before() -> None:
    assert PlacementSettings().exposure_problem() is None


@pytest.mark.parametrize(("extra", "message"), [
    ({"tls_key_file": Path("/k")}, "tls_cert_file and placement.tls_key_file go together"),
    ({"tls_client_ca_file": Path("/ca")}, "tls_client_ca_file (mutual TLS) needs"),
])
def test_half_a_tls_configuration_is_refused_naming_what_is_missing(
        extra: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as err:
        PlacementSettings.model_validate(extra)
    assert message in str(err.value)


@pytest.mark.parametrize(("value", "message"), [
    (0, "greater than or equal to 1"), (2048, "less than or equal to 2047"),
])
def test_the_largest_request_is_64_mib_unless_set_and_between_1_and_2047_mib(
        value: int, message: str) -> None:
    assert PlacementSettings().max_request_mib == 64
    assert PlacementSettings.model_validate({"max_request_mib": 2047}).max_request_mib == 2047
    with pytest.raises(ValidationError) as err:
        PlacementSettings.model_validate({"max_request_mib": value})
    assert "max_request_mib" in str(err.value) and message in str(err.value)
