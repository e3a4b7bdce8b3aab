"""`headroom placement serve`'s transport security: TLS (mutual with a client CA, whose
certificates' identities may be mapped to tenants), a bearer token and a plaintext health-only
port, from options or, when absent, from --config's ``placement`` group; the same rule as
``headroom serve``: an address reachable beyond this machine needs TLS and authentication unless
--allow-insecure."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controlplane.cli.streams import usage_error
from scheduler.metrics import check_bindable, host_and_port, is_loopback

if TYPE_CHECKING:  # imported where used: `headroom placement --help` loads no gRPC
    from controlplane.settings_placement import PlacementSettings
    from scheduler.security import TransportSecurity

TlsCertOption = Annotated[Path | None, typer.Option(
    "--tls-cert", metavar="PEM", dir_okay=False,
    help="Certificate chain: serve TLS (with --tls-key); re-read when it changes.")]
TlsKeyOption = Annotated[Path | None, typer.Option(
    "--tls-key", metavar="PEM", dir_okay=False, help="Private key of --tls-cert.")]
TlsClientCaOption = Annotated[Path | None, typer.Option(
    "--tls-client-ca", metavar="PEM", dir_okay=False,
    help="Mutual TLS: every client presents a certificate this CA signed.")]
TokenFileOption = Annotated[Path | None, typer.Option(
    "--token-file", metavar="FILE", dir_okay=False,
    help="Bearer tokens, one per line: calls (but health and KEDA's scaler) must send "
         "'authorization: Bearer <token>'; re-read when it changes. '<token>' alone: unscoped; "
         "'<token> tenant=A[,B...]': only those tenants' Place, bindings (Release, "
         "RenewLeases, RankReplicas, ListBindings), no SyncInventory or PlanFleet.")]
ClientIdentitiesOption = Annotated[Path | None, typer.Option(
    "--client-identities", metavar="FILE", dir_okay=False,
    help="With --tls-client-ca: client certificate identities, one per line (cn:NAME, "
         "dns:NAME or uri:URI, alone or with tenant=A[,B...]), scoped as token lines; a "
         "certificate matching none is refused; re-read when it changes.")]
HealthListenOption = Annotated[str | None, typer.Option(
    "--health-listen", metavar="HOST:PORT",
    help="Serve the health service alone, in plaintext, here (kubelet's gRPC probe).")]
AllowInsecureOption = Annotated[bool, typer.Option(
    "--allow-insecure",
    help="Serve an address reachable beyond this machine without TLS and authentication "
         "(only behind a service mesh that provides both).")]


@dataclass(frozen=True, slots=True)
class ServedSecurity:
    security: TransportSecurity
    health_listen: str | None


def served_security(listen: str, configured: PlacementSettings | None, *,
                    tls_cert: Path | None, tls_key: Path | None, tls_client_ca: Path | None,
                    token_file: Path | None, health_listen: str | None,
                    allow_insecure: bool, client_identities: Path | None = None,
                    listen_named: str = "--listen") -> ServedSecurity:
    """The options, each falling back to --config's ``placement`` setting; every file read and
    checked; an exit (code 2) naming the option otherwise (``listen`` as ``listen_named``:
    ``--listen``, or the setting it came from)."""
    from controlplane.settings_placement import PlacementSettings
    from scheduler.security import SecurityFileError, TransportSecurity, check_files

    base = configured or PlacementSettings()
    security = TransportSecurity(tls_cert or base.tls_cert_file, tls_key or base.tls_key_file,
                                 tls_client_ca or base.tls_client_ca_file,
                                 token_file or base.token_file,
                                 client_identities or base.client_identities_file)
    health = health_listen or base.health_listen
    if (security.tls_cert_file is None) != (security.tls_key_file is None):
        raise usage_error("--tls-cert and --tls-key go together")
    if security.tls_client_ca_file is not None and not security.tls:
        raise usage_error("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
    if security.client_identities_file is not None and security.tls_client_ca_file is None:
        raise usage_error("--client-identities maps client certificates to tenants: it needs "
                          "--tls-client-ca (mutual TLS)")
    authenticated = security.token_file is not None or security.tls_client_ca_file is not None
    if not (is_loopback(host_and_port(listen)[0]) or allow_insecure or base.allow_insecure
            or (security.tls and authenticated)):
        raise usage_error(f"{listen_named} {listen} is reachable beyond this machine: give "
                          "--tls-cert and --tls-key with --token-file and/or --tls-client-ca, "
                          "or --allow-insecure behind a service mesh that provides both")
    if health is not None:
        try:
            check_bindable(health, port_free=True)
        except ValueError as exc:
            raise usage_error(f"--health-listen {exc}") from None
    try:
        check_files(security)
    except SecurityFileError as error:
        option = {"tls_cert_file": "--tls-cert", "tls_key_file": "--tls-key",
                  "tls_client_ca_file": "--tls-client-ca", "token_file": "--token-file",
                  "client_identities_file": "--client-identities"}
        raise usage_error(f"{option[error.setting]} {error.path}: {error.problem}") from None
    return ServedSecurity(security, health)
