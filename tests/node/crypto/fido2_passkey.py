"""A software passkey built from Yubico's python-fido2 structures, as a third-party wallet would hold one.

The credential's public key is a COSE_Key (``fido2.cose.ES256``), the wallet turns it into the raw
``x ‖ y`` the chain stores; every assertion is a ``fido2.webauthn.CollectedClientData`` and
``AuthenticatorData`` signed with ECDSA P-256/SHA-256, its signature DER-encoded as browsers return it
and normalised to low S. ``fault`` makes the next assertions wrong in one way, for the refusal tests.
The same assertions are re-checked by py_webauthn (``py_webauthn_verify``).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from fido2 import cbor
from fido2.cose import ES256
from fido2.webauthn import AuthenticatorData, CollectedClientData
from webauthn import verify_authentication_response

from node.crypto import ecdsa
from node.crypto.custody import CustodySignature, SignatureType, custody_key_address
from node.crypto.hashing import sha256

FLAGS = AuthenticatorData.FLAG


class Fault(Enum):
    """One way an assertion can be wrong, and the machine-readable cause the node answers with."""

    MISSING_UV = "WEBAUTHN_FLAGS"
    WRONG_CHALLENGE = "WEBAUTHN_CHALLENGE"
    WRONG_ORIGIN = "WEBAUTHN_ORIGIN"
    WRONG_RP_ID = "WEBAUTHN_RP_ID"
    HIGH_S = "HIGH_S_SIGNATURE"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def cose_to_raw(cose_key: bytes) -> bytes:
    """A CBOR COSE_Key (EC2, P-256, ES256) as the 64-byte ``x ‖ y`` the chain stores."""
    decoded = cbor.decode(cose_key)
    if not isinstance(decoded, Mapping):
        raise ValueError("a COSE_Key is a CBOR map")
    key = ES256(decoded)
    if key[1] != 2 or key[3] != ES256.ALGORITHM or key[-1] != 1:  # kty EC2, alg ES256, crv P-256
        raise ValueError("not an ES256 P-256 COSE key")
    x, y = bytes(key[-2]), bytes(key[-3])
    if len(x) != 32 or len(y) != 32:
        raise ValueError("P-256 coordinates are 32 bytes each")
    return x + y


def spki_to_raw(spki_der: bytes) -> bytes:
    """A DER SubjectPublicKeyInfo (what ``getPublicKey()`` returns) as the 64-byte ``x ‖ y``."""
    key = serialization.load_der_public_key(spki_der)
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError("not a P-256 public key")
    point = key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return point[1:]


@dataclass(frozen=True)
class Assertion:
    authenticator_data: AuthenticatorData
    client_data: CollectedClientData
    signature: bytes  # DER
    digest: bytes  # what the wallet was asked to sign (the custody digest): the expected challenge


@dataclass
class Fido2Passkey:
    """A passkey custody key (signature type 3) whose assertions are fido2 structures."""

    rp_id: str
    origin: str
    private_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    credential_id: bytes = field(default_factory=lambda: os.urandom(16))
    fault: Fault | None = None
    counter: int = 0
    assertions: list[Assertion] = field(default_factory=list)

    signature_type = SignatureType.WEBAUTHN

    @property
    def cose_key(self) -> bytes:
        """The credential public key as the authenticator reports it at registration (CBOR COSE_Key)."""
        return cbor.encode(ES256.from_cryptography_key(self.private_key.public_key()))

    @property
    def spki(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    @property
    def public_key(self) -> bytes:
        return cose_to_raw(self.cose_key)

    @property
    def address(self) -> bytes:
        return custody_key_address(int(self.signature_type), self.public_key)

    def get_assertion(self, challenge: bytes) -> Assertion:
        """navigator.credentials.get() with userVerification "required", answered in software."""
        fault = self.fault
        origin = "https://evil.example" if fault is Fault.WRONG_ORIGIN else self.origin
        client_data = CollectedClientData.create(
            type=CollectedClientData.TYPE.GET,
            challenge=sha256(challenge) if fault is Fault.WRONG_CHALLENGE else challenge,
            origin=origin,
        )
        rp_id = "evil.example" if fault is Fault.WRONG_RP_ID else self.rp_id
        flags = FLAGS.UP if fault is Fault.MISSING_UV else FLAGS.UP | FLAGS.UV
        self.counter += 1
        auth_data = AuthenticatorData.create(sha256(rp_id.encode()), flags, self.counter)
        der = self.private_key.sign(bytes(auth_data) + client_data.hash, ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        s = min(s, ecdsa.P256_N - s)  # low S, as the chain requires
        if fault is Fault.HIGH_S:
            s = ecdsa.P256_N - s
        assertion = Assertion(auth_data, client_data, encode_dss_signature(r, s), challenge)
        self.assertions.append(assertion)
        return assertion

    def custody_signature(self, digest: bytes) -> CustodySignature:
        a = self.get_assertion(digest)
        return CustodySignature(
            signature_type=int(self.signature_type),
            signature=a.signature,
            public_key=self.public_key,
            authenticator_data=bytes(a.authenticator_data),
            client_data_json=bytes(a.client_data),
        )

    def py_webauthn_verify(self, assertion: Assertion) -> int:
        """py_webauthn's relying-party verification of ``assertion``; returns the new sign count."""
        credential = {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": b64url(bytes(assertion.client_data)),
                "authenticatorData": b64url(bytes(assertion.authenticator_data)),
                "signature": b64url(assertion.signature),
            },
        }
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=assertion.digest,
            expected_rp_id=self.rp_id,
            expected_origin=self.origin,
            credential_public_key=self.cose_key,
            credential_current_sign_count=0,
            require_user_verification=True,
        )
        return int(verified.new_sign_count)
