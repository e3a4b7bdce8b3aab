"""Settings group of the gRPC placement API that ``headroom serve`` and ``demo`` serve:
``placement`` (its listen, metrics and health addresses, TLS, bearer tokens and client
certificate identities, the largest request it receives, and when an address beyond loopback
may go without them)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from controlplane.settings_groups import Group
from scheduler.limits import DEFAULT_MAX_REQUEST_MIB, MAX_REQUEST_MIB_LIMIT
from scheduler.metrics import host_and_port, is_loopback
from scheduler.stream_shares import DEFAULT_CALLER_SHARE


class PlacementSettings(Group):
    listen: str = Field("127.0.0.1:50051", description="host:port of the gRPC placement API")
    metrics_listen: str | None = Field(
        None, description="host:port of Prometheus /metrics (placement API and reconcile loop) "
        "for headroom serve and demo; None = off")
    health_listen: str | None = Field(
        None, description="host:port of the gRPC health service alone, in plaintext, for "
        "kubelet's gRPC probe (it speaks neither TLS nor tokens); None = off")
    tls_cert_file: Path | None = Field(None, description="PEM certificate chain of the "
                                       "placement API (with tls_key_file): TLS; re-read when "
                                       "it changes (a rotated Secret needs no restart)")
    tls_key_file: Path | None = Field(None, description="PEM private key of tls_cert_file")
    tls_client_ca_file: Path | None = Field(None, description="PEM CA: every client must "
                                            "present a certificate it signed (mutual TLS; "
                                            "how KEDA's scaler calls authenticate)")
    token_file: Path | None = Field(None, description="bearer tokens, one per line (two while "
                                    "clients move to a new one): every call but health and "
                                    "KEDA's scaler must send 'authorization: Bearer <token>'; "
                                    "re-read when it changes; never logged. '<token>' alone is "
                                    "unscoped; '<token> tenant=A[,B...]' may only Place for "
                                    "those tenants and Release, RenewLeases, RankReplicas and "
                                    "ListBindings their bindings, and never SyncInventory or "
                                    "PlanFleet (PERMISSION_DENIED)")
    client_identities_file: Path | None = Field(
        None, description="mutual TLS client certificate identities mapped to tenants, one per "
        "line: 'cn:<common name>', 'dns:<SAN DNS name>' or 'uri:<SAN URI>' (a SPIFFE id), alone "
        "(unscoped) or with ' tenant=A[,B...]' (scoped as a token line); a certificate matching "
        "no line is UNAUTHENTICATED, several: the union of their scopes; with a token too, what "
        "both allow; re-read when it changes; needs tls_client_ca_file")
    max_request_mib: int = Field(
        DEFAULT_MAX_REQUEST_MIB, ge=1, le=MAX_REQUEST_MIB_LIMIT,
        description="the largest request, in MiB, the placement API's gRPC server receives on "
        "any of its services (health and KEDA's scaler too); a larger one is RESOURCE_EXHAUSTED "
        "before it is read. It bounds the memory one call can make the server hold; the "
        "default is three times a SyncInventory of 2,000 nodes x 8 GPUs x 7 MIG instances with 150 "
        "labels per node (21 MiB)")
    watch_caller_share: float = Field(
        DEFAULT_CALLER_SHARE, gt=0, le=1, description="the share of the server's WatchPlan "
        "streams one tenant-scoped caller, or one without credentials (known by its address), "
        "may hold at once, at least 1, so that it cannot take them all and lock the others "
        "out (an unscoped token or certificate, the operator's, may use them all); beyond it "
        "RESOURCE_EXHAUSTED watch_streams_per_caller")
    allow_insecure: bool = Field(False, description="serve a listen address beyond loopback "
                                 "without TLS and authentication (only behind a service mesh "
                                 "that provides both)")

    @field_validator("listen", "metrics_listen", "health_listen")
    @classmethod
    def _host_and_port(cls, value: str | None) -> str | None:
        if value is not None:
            host_and_port(value)
        return value

    @model_validator(mode="after")
    def _tls_files_together(self) -> PlacementSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("placement.tls_cert_file and placement.tls_key_file go together")
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise ValueError("placement.tls_client_ca_file (mutual TLS) needs "
                             "placement.tls_cert_file and placement.tls_key_file")
        return self

    @model_validator(mode="after")
    def _identities_need_client_ca(self) -> PlacementSettings:
        if self.client_identities_file is not None and self.tls_client_ca_file is None:
            raise ValueError("placement.client_identities_file maps client certificates to "
                             "tenants: it needs placement.tls_client_ca_file (mutual TLS)")
        return self

    def exposure_problem(self) -> str | None:
        """Why serving ``listen`` so is unsafe, or None: an address beyond loopback needs TLS
        and authentication (a token and/or client CA) unless ``allow_insecure``. Checked where
        the API is served (serve, demo), after the address itself."""
        authenticated = self.token_file is not None or self.tls_client_ca_file is not None
        host = host_and_port(self.listen)[0]
        if (is_loopback(host) or self.allow_insecure
                or (self.tls_cert_file is not None and authenticated)):
            return None
        return (f"placement.listen {self.listen} is reachable beyond this machine, so the "
                "placement API needs TLS (placement.tls_cert_file, placement.tls_key_file) and "
                "authentication (placement.token_file and/or placement.tls_client_ca_file); "
                "or set placement.allow_insecure: true behind a service mesh that provides both")
