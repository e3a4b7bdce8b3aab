"""Mutual-TLS client certificates mapped to tenant scopes (``placement.client_identities_file``),
over real gRPC with real certificates on 127.0.0.1: a certificate's listed identities scope it as
a token line would, one listed nowhere is refused, and with a token too the call may do what both
allow."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from placement_builders import make_node, make_place
from pydantic import ValidationError
from x509_builders import Leaf, TestCA

from controlplane.settings_placement import PlacementSettings
from protos.headroom.v1 import placement_pb2 as pb
from protos.headroom.v1 import placement_pb2_grpc as pb_grpc
from scheduler.client_identities import parse_identity_file, peer_identities, scope_of
from scheduler.metrics import PlacementMetrics
from scheduler.security import SecurityFileError, TransportSecurity
from scheduler.server import create_server, stop

ALPHA_ID = "spiffe://cluster.local/ns/router-a/sa/default"
B_ID = "spiffe://cluster.local/ns/router-b/sa/default"
IDENTITIES = f"""# the operators' own tools: unscoped
cn:ops-operator

uri:{ALPHA_ID} tenant=alpha
dns:router-b.serving.svc tenant=beta
  uri:{B_ID} tenant=gamma
"""
TOKENS = "ops-token\nab-token tenant=alpha,beta\nbeta-token tenant=beta\n"
CA = TestCA()
OPS = CA.leaf("ops-operator")
ALPHA = CA.leaf(uris=(ALPHA_ID,))
ROUTER_B = CA.leaf("router-b", dns=("Router-B.serving.svc",), uris=(B_ID,))
STRANGER = CA.leaf("someone", dns=("someone.serving.svc",))


@dataclass
class Served:
    port: int
    identities_file: Path
    metrics: PlacementMetrics
    channels: dict[int, grpc.Channel] = field(default_factory=dict)

    def channel(self, leaf: Leaf) -> grpc.Channel:
        if id(leaf) not in self.channels:
            creds = grpc.ssl_channel_credentials(CA.cert_pem, leaf.key_pem, leaf.cert_pem)
            self.channels[id(leaf)] = grpc.secure_channel(f"127.0.0.1:{self.port}", creds)
        return self.channels[id(leaf)]

    def call(self, method: str, request: object, leaf: Leaf, token: str | None = None) -> object:
        rpc: Callable[..., object] = getattr(pb_grpc.PlacementStub(self.channel(leaf)), method)
        metadata = (("authorization", f"Bearer {token}"),) if token is not None else None
        return rpc(request, timeout=5, metadata=metadata)

    def refused(self, method: str, request: object, leaf: Leaf,
                token: str | None = None) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as err:
            self.call(method, request, leaf, token)
        return err.value

    def place(self, workload_id: str, tenant: str, leaf: Leaf, token: str | None = None
              ) -> grpc.StatusCode:
        """OK, or the code of the refusal."""
        try:
            self.call("Place", make_place(workload_id, tenant=tenant), leaf, token)
        except grpc.RpcError as err:
            return err.code()
        return grpc.StatusCode.OK


def _serve(tmp_path: Path, token_file: Path | None = None, identities: str = IDENTITIES
           ) -> Iterator[Served]:
    server_leaf = CA.leaf("placement", dns=("localhost",), ips=("127.0.0.1",))
    files = {name: tmp_path / name for name in ("tls.crt", "tls.key", "clients.pem", "ids")}
    files["tls.crt"].write_bytes(server_leaf.cert_pem)
    files["tls.key"].write_bytes(server_leaf.key_pem)
    files["clients.pem"].write_bytes(CA.cert_pem)
    files["ids"].write_text(identities)
    metrics = PlacementMetrics()
    server, port = create_server("127.0.0.1:0", metrics=metrics, security=TransportSecurity(
        files["tls.crt"], files["tls.key"], files["clients.pem"], token_file, files["ids"]))
    served = Served(port, files["ids"], metrics)
    try:
        served.call("SyncInventory", pb.SyncInventoryRequest(
            nodes=[make_node(f"n{i}") for i in range(4)]), OPS, "ops-token" if token_file else None)
        yield served
    finally:
        for channel in served.channels.values():
            channel.close()
        stop(server, grace_s=0.5)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """TLS, client certificates from CA, IDENTITIES; no token file."""
    yield from _serve(tmp_path)


@pytest.fixture
def with_tokens(tmp_path: Path) -> Iterator[Served]:
    """As ``served``, with the token file TOKENS as well."""
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKENS)
    yield from _serve(tmp_path, token_file)


# ------------------------------------------------------------------ the identities file


def test_identity_lines_skip_comments_and_blanks_and_give_each_identity_its_scope() -> None:
    assert parse_identity_file(IDENTITIES.encode()) == {
        "cn:ops-operator": None, f"uri:{ALPHA_ID}": frozenset({"alpha"}),
        "dns:router-b.serving.svc": frozenset({"beta"}), f"uri:{B_ID}": frozenset({"gamma"})}


def test_an_identity_with_spaces_is_listed_in_double_quotes_with_backslash_escapes() -> None:
    text = (b'cn:"KEDA Operator" tenant=alpha\n'
            b'  cn:"ops \\"blue\\" \\\\ team"\n'
            b'dns:"Router.SVC" tenant=beta\n')
    assert parse_identity_file(text) == {
        "cn:KEDA Operator": frozenset({"alpha"}), 'cn:ops "blue" \\ team': None,
        "dns:router.svc": frozenset({"beta"})}
    listed = parse_identity_file(text)
    assert scope_of(listed, peer_identities({"x509_common_name": [b"KEDA Operator"]})) == (
        True, frozenset({"alpha"}))


def test_a_certificates_identities_are_its_common_name_and_typed_sans_never_the_untyped_list(
        ) -> None:
    context = {"x509_common_name": [b"router"], "peer_dns": [b"Router.SVC"],
               "peer_uri": [b"spiffe://x/y"], "peer_email": [b"a@b.c"],
               "x509_subject_alternative_name": [b"router.svc", b"spiffe://x/y", b"a@b.c"]}
    assert peer_identities(context) == ("cn:router", "dns:router.svc", "uri:spiffe://x/y")
    assert peer_identities({"x509_common_name": [b""], "peer_uri": [b"spiffe://x/y"]}) == (
        "uri:spiffe://x/y",)


def test_several_matching_lines_give_the_union_of_their_scopes_and_an_unscoped_one_unscoped(
        ) -> None:
    listed = parse_identity_file(IDENTITIES.encode())
    assert scope_of(listed, ["dns:router-b.serving.svc", f"uri:{B_ID}"]) == (
        True, frozenset({"beta", "gamma"}))
    assert scope_of(listed, ["cn:ops-operator", f"uri:{ALPHA_ID}"]) == (True, None)
    assert scope_of(listed, ["cn:someone", "dns:alpha"]) == (False, frozenset())


@pytest.mark.parametrize(("line", "problem"), [
    ("router tenant=alpha", "an identity starts with cn:, dns:, uri:"),
    ("email:a@b.c", "an identity starts with cn:, dns:, uri:"),
    ("cn: tenant=alpha", "an empty cn: identity"),
    ("uri:router-a tenant=alpha", "has no scheme"),
    ("dns:x.svc tenant=", "an empty tenant name"),
    ("dns:x.svc team=alpha", "only tenant= may follow"),
    ("cn:KEDA Operator", 'a name with spaces goes in double quotes: cn:"KEDA Operator"'),
    ('cn:"KEDA Operator', "an opening double quote without its closing one"),
    ('cn:"KEDA"Operator tenant=alpha', "a closing double quote must end the identity"),
    ('cn:"" tenant=alpha', "an empty cn: identity"),
    ("tenant=alpha", "no identity before tenant="),
    ("cn:ops-operator tenant=alpha", "cn:ops-operator is on line 1 with another scope"),
])
def test_a_malformed_identity_line_is_refused_naming_the_file_and_line(
        tmp_path: Path, line: str, problem: str) -> None:
    with pytest.raises(SecurityFileError) as err:
        next(_serve(tmp_path, identities=f"cn:ops-operator\n# a comment\n{line}\n"))
    ids = tmp_path / "ids"
    assert err.value.setting == "client_identities_file" and err.value.path == ids
    assert f"client_identities_file {ids}: line 3: " in str(err.value)
    assert problem in str(err.value)


def test_the_setting_without_a_client_ca_is_refused_naming_both_settings() -> None:
    with pytest.raises(ValidationError) as err:
        PlacementSettings.model_validate({"tls_cert_file": "/tls.crt", "tls_key_file": "/tls.key",
                                          "client_identities_file": "/ids"})
    assert ("placement.client_identities_file maps client certificates to tenants: it needs "
            "placement.tls_client_ca_file" in str(err.value))
    assert PlacementSettings.model_validate(
        {"tls_cert_file": "/tls.crt", "tls_key_file": "/tls.key", "tls_client_ca_file": "/ca",
         "client_identities_file": "/ids"}).client_identities_file == Path("/ids")


def test_a_server_given_client_identities_without_a_client_ca_is_refused_before_binding(
        tmp_path: Path) -> None:
    ids = tmp_path / "ids"
    ids.write_text(IDENTITIES)
    with pytest.raises(SecurityFileError) as err:
        create_server("127.0.0.1:0", security=TransportSecurity(client_identities_file=ids))
    assert err.value.setting == "client_identities_file"
    assert "needs tls_client_ca_file" in str(err.value)


# ------------------------------------------------------------------ scopes of certificates


def test_a_scoped_certificate_places_for_its_tenant_and_not_for_another(served: Served) -> None:
    assert served.place("a1", "alpha", ALPHA) == grpc.StatusCode.OK
    assert served.place("a2", "beta", ALPHA) == grpc.StatusCode.PERMISSION_DENIED
    err = served.refused("Place", make_place("a3", tenant="beta"), ALPHA)
    assert "scoped to tenants alpha" in (err.details() or "")


def test_a_certificate_matching_two_lines_places_for_the_tenants_of_both(served: Served) -> None:
    assert served.place("b1", "beta", ROUTER_B) == grpc.StatusCode.OK
    assert served.place("g1", "gamma", ROUTER_B) == grpc.StatusCode.OK
    assert served.place("a1", "alpha", ROUTER_B) == grpc.StatusCode.PERMISSION_DENIED


def test_a_certificate_listed_nowhere_is_unauthenticated_on_unary_and_streaming_calls(
        served: Served) -> None:
    err = served.refused("GetPlan", pb.GetPlanRequest(), STRANGER)
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    details = err.details() or ""
    assert "cn:someone, dns:someone.serving.svc" in details
    assert "none of its identities is listed in client_identities_file" in details
    stream = pb_grpc.PlacementStub(served.channel(STRANGER)).WatchPlan(pb.WatchPlanRequest(),
                                                                        timeout=5)
    with pytest.raises(grpc.RpcError) as watched:
        next(iter(stream))
    assert watched.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert served.metrics.registry.get_sample_value(
        "headroom_placement_requests_total",
        {"method": "GetPlan", "code": "UNAUTHENTICATED"}) == 1.0


def test_an_unscoped_certificate_syncs_the_inventory_and_a_scoped_one_may_not(
        served: Served) -> None:
    request = pb.SyncInventoryRequest(nodes=[make_node(f"n{i}") for i in range(5)])
    assert isinstance(served.call("SyncInventory", request, OPS), pb.SyncInventoryResponse)
    err = served.refused("SyncInventory", request, ALPHA)
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED


def test_a_scoped_certificate_lists_only_its_tenants_bindings(served: Served) -> None:
    for workload_id, tenant in (("a1", "alpha"), ("b1", "beta"), ("g1", "gamma")):
        assert served.place(workload_id, tenant, OPS) == grpc.StatusCode.OK
    listed = served.call("ListBindings", pb.ListBindingsRequest(), ROUTER_B)
    assert isinstance(listed, pb.ListBindingsResponse)
    assert sorted(b.workload_id for b in listed.bindings) == ["b1", "g1"]


def test_health_is_answered_for_a_certificate_listed_nowhere(served: Served) -> None:
    reply = health_pb2_grpc.HealthStub(served.channel(STRANGER)).Check(
        health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_an_edited_identities_file_takes_effect_while_serving_and_a_malformed_one_keeps_the_last(
        served: Served) -> None:
    assert served.place("s1", "alpha", STRANGER) == grpc.StatusCode.UNAUTHENTICATED
    served.identities_file.write_text(
        f"cn:ops-operator\nuri:{ALPHA_ID} tenant=delta\ndns:someone.serving.svc tenant=alpha\n")
    assert served.place("s1", "alpha", STRANGER) == grpc.StatusCode.OK
    assert served.place("a1", "alpha", ALPHA) == grpc.StatusCode.PERMISSION_DENIED
    assert served.place("d1", "delta", ALPHA) == grpc.StatusCode.OK
    served.identities_file.write_text("cn:ops-operator tenant=\n")
    assert served.place("s2", "alpha", STRANGER) == grpc.StatusCode.OK


# ------------------------------------------------------------------ a token and a certificate


def test_a_token_and_a_certificate_together_allow_only_the_tenants_both_allow(
        with_tokens: Served) -> None:
    place = with_tokens.place
    assert place("b1", "beta", ROUTER_B, "ab-token") == grpc.StatusCode.OK
    assert place("g1", "gamma", ROUTER_B, "ab-token") == grpc.StatusCode.PERMISSION_DENIED
    assert place("a1", "alpha", ROUTER_B, "ab-token") == grpc.StatusCode.PERMISSION_DENIED
    # unscoped on one side: the other side's scope
    assert place("a2", "alpha", ALPHA, "ops-token") == grpc.StatusCode.OK
    assert place("b2", "beta", ALPHA, "ops-token") == grpc.StatusCode.PERMISSION_DENIED
    assert place("b3", "beta", OPS, "ab-token") == grpc.StatusCode.OK
    assert with_tokens.refused("SyncInventory", pb.SyncInventoryRequest(), OPS,
                               "ab-token").code() == grpc.StatusCode.PERMISSION_DENIED


def test_a_token_and_a_certificate_sharing_no_tenant_may_place_for_none(
        with_tokens: Served) -> None:
    err = with_tokens.refused("Place", make_place("a1", tenant="alpha"), ALPHA, "beta-token")
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "share none" in (err.details() or "")
    assert with_tokens.place("b1", "beta", ALPHA, "beta-token") == grpc.StatusCode.PERMISSION_DENIED


def test_with_a_token_file_a_listed_certificate_still_needs_a_token_and_a_token_a_listed_cert(
        with_tokens: Served) -> None:
    err = with_tokens.refused("GetPlan", pb.GetPlanRequest(), ALPHA)
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "no bearer token" in (err.details() or "")
    err = with_tokens.refused("GetPlan", pb.GetPlanRequest(), STRANGER, "ops-token")
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "client_identities_file" in (err.details() or "")
