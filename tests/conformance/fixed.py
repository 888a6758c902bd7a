"""Everything the conformance vectors are made from is fixed here: keys, clock, network, JSON forms.

Private keys are derived from names (`BLAKE3("conformance/v1/" + name)`), so the vectors name their keys
and a reader can re-derive them; signatures are deterministic (Ed25519 by RFC 8032, ECDSA by RFC 6979),
so regenerating gives byte-identical files.
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, decode_dss_signature, encode_dss_signature
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from chain.v1 import message_pb2 as pb
from node.codec import blake3_256
from node.crypto import ecdsa
from node.crypto.custody import CustodySignature
from node.crypto.hashing import sha256
from node.sdk.keys import Ed25519Key, P256Key, Secp256k1Key
from node.sdk.webauthn import Assertion, SoftwareAuthenticator

VERSION = 1
# Block time of the first block and every message timestamp's origin (the test harness's START).
T0 = 1_800_000_000
NETWORK = pb.NETWORK_DEVNET
RP_ID = "localhost"
ORIGIN = "https://localhost"


def seed(name: str) -> bytes:
    """The 32-byte private key (or Ed25519 seed) called `name`."""
    return blake3_256(f"conformance/v{VERSION}/{name}".encode())


def ed25519(name: str) -> Ed25519Key:
    return Ed25519Key.from_private_bytes(seed(name))


def secp256k1(name: str) -> Secp256k1Key:
    return Secp256k1Key.from_private_bytes(seed(name))


def _deterministic_p256_sign(key: ec.EllipticCurvePrivateKey, data: bytes, *, prehashed: bool) -> ecdsa.RS:
    algorithm: Any = Prehashed(hashes.SHA256()) if prehashed else hashes.SHA256()
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(algorithm, deterministic_signing=True)))
    return ecdsa.RS(r, s)


class P256(P256Key):
    """`P256Key` signing with RFC 6979 nonces (the SDK's signatures are randomized)."""

    def sign_digest(self, digest: bytes) -> bytes:
        ecdsa.check_digest(digest)
        rs = _deterministic_p256_sign(self._private_key, digest, prehashed=True)
        return ecdsa.join_raw(ecdsa.low_s(rs, ecdsa.P256_N))


def p256_private(name: str) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(int.from_bytes(seed(name), "big"), ec.SECP256R1())


def p256(name: str) -> P256:
    return P256(p256_private(name))


class Authenticator(SoftwareAuthenticator):
    """`SoftwareAuthenticator` with RFC 6979 nonces; the signature is left as the authenticator makes it
    (DER, S not normalized), like a real passkey."""

    def sign(self, authenticator_data: bytes, client_data_json: bytes) -> bytes:
        rs = _deterministic_p256_sign(self.private_key, authenticator_data + sha256(client_data_json), prehashed=False)
        return ecdsa_der(rs)


def ecdsa_der(rs: ecdsa.RS) -> bytes:
    return encode_dss_signature(rs.r, rs.s)


class WebAuthn:
    """A passkey custody key (type 3): assertions from `Authenticator`, S normalized like `WebAuthnKey`.

    `tamper(assertion) -> assertion` lets a rejected-case vector break one thing before normalizing.
    """

    signature_type = 3

    def __init__(self, name: str, *, origin: str = ORIGIN, rp_id: str = RP_ID, **flags: bool) -> None:
        self.authenticator = Authenticator(p256_private(name), rp_id=rp_id, origin=origin, **flags)

    @property
    def public_key(self) -> bytes:
        return self.authenticator.public_key

    @property
    def address(self) -> bytes:
        return self.authenticator.address

    def assertion(self, challenge: bytes) -> Assertion:
        return self.authenticator.get_assertion(challenge)

    def custody_signature(self, digest: bytes) -> CustodySignature:
        a = self.assertion(digest)
        rs = ecdsa.split_der(a.signature)
        return CustodySignature(
            signature_type=3,
            signature=ecdsa.join_raw(ecdsa.low_s(rs, ecdsa.P256_N)),
            public_key=self.public_key,
            authenticator_data=a.authenticator_data,
            client_data_json=a.client_data_json,
        )


def h(data: bytes) -> str:
    """0x-prefixed lower-case hex (the vectors' form of bytes)."""
    return "0x" + bytes(data).hex()


def unhex(text: str) -> bytes:
    return bytes.fromhex(text.removeprefix("0x"))


def proto_json(msg: Message) -> dict[str, Any]:
    """The protobuf JSON mapping (the REST write format): lowerCamelCase names, bytes base64, enums by name."""
    return MessageToDict(msg)


def dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
