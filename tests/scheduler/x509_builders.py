"""Test certificates made with ``cryptography`` at test time: a CA and leaves it signs with any
common name and DNS / URI subject alternative names (trustme issues no URI SANs: SPIFFE ids)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Leaf:
    """A certificate (PEM) and its private key (PEM)."""

    cert_pem: bytes
    key_pem: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str | None) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
                     if common_name else [])


class TestCA:
    """A self-signed CA valid from an hour ago for a day."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, name: str = "headroom test CA") -> None:
        self._key, self._name = _key(), _name(name)
        self._from = datetime.now(UTC) - timedelta(hours=1)
        self.cert = (self._builder(self._name, self._key.public_key())
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                                    critical=True)
                     .sign(self._key, hashes.SHA256()))
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def _builder(self, subject: x509.Name, public_key: ec.EllipticCurvePublicKey
                 ) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(self._name)
                .public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(self._from).not_valid_after(self._from + timedelta(days=1)))

    def leaf(self, common_name: str | None = None, dns: tuple[str, ...] = (),
             uris: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> Leaf:
        """A certificate this CA signed, for a client or (with ``ips``) a server."""
        key = _key()
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names += [x509.UniformResourceIdentifier(u) for u in uris]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        builder = self._builder(_name(common_name), key.public_key())
        if names:  # critical when the subject is empty (RFC 5280)
            builder = builder.add_extension(x509.SubjectAlternativeName(names),
                                            critical=not common_name)
        cert = builder.sign(self._key, hashes.SHA256())
        return Leaf(cert.public_bytes(serialization.Encoding.PEM),
                    key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
