"""Client-side keys: delegated Ed25519 keys and the three custody key types.

- ``Ed25519Key`` signs message envelopes (delegated keys).
- ``Secp256k1Key``, ``P256Key`` and ``WebAuthnKey`` sign custody digests (EIP-712, see
  ``node.crypto.eip712``) and wrap the result as a ``CustodySignature`` the node verifies with
  ``node.crypto.custody.verify_custody_signature``.

Custody public keys are 64 bytes ``x ‖ y``; ``address`` is the 20-byte key id (last 20 bytes of
keccak256(x ‖ y)). All signatures produced here are low-S. ``Ed25519Key`` and ``Secp256k1Key`` are defined in
``node.crypto.signers`` (the node's devnet authority signs with them too) and re-exported here.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, decode_dss_signature

from node.crypto import ecdsa
from node.crypto.address import address_of_coordinates
from node.crypto.custody import CustodySignature, SignatureType
from node.crypto.signers import PRIVATE_KEY_SIZE, Ed25519Key, Secp256k1Key, check_private_size
from node.sdk.webauthn import SoftwareAuthenticator, p256_public_coordinates

__all__ = ["PRIVATE_KEY_SIZE", "Ed25519Key", "P256Key", "Secp256k1Key", "WebAuthnKey"]


def _p256_from_private_bytes(private_bytes: bytes) -> ec.EllipticCurvePrivateKey:
    check_private_size(private_bytes)
    scalar = int.from_bytes(private_bytes, "big")
    if not 0 < scalar < ecdsa.P256_N:
        raise ValueError("P-256 private scalar out of range")
    return ec.derive_private_key(scalar, ec.SECP256R1())


def _p256_private_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_numbers().private_value.to_bytes(PRIVATE_KEY_SIZE, "big")


def _p256_sign_digest(key: ec.EllipticCurvePrivateKey, digest: bytes) -> bytes:
    ecdsa.check_digest(digest)
    r, s = decode_dss_signature(key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256()))))
    return ecdsa.join_raw(ecdsa.low_s(ecdsa.RS(r, s), ecdsa.P256_N))


class P256Key:
    """A raw P-256 custody key (signature type 2), e.g. held in an HSM or secure enclave."""

    signature_type = SignatureType.P256

    def __init__(self, private_key: ec.EllipticCurvePrivateKey) -> None:
        if not isinstance(private_key.curve, ec.SECP256R1):
            raise ValueError("P256Key needs a P-256 private key")
        self._private_key = private_key

    @classmethod
    def generate(cls) -> P256Key:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_private_bytes(cls, private_bytes: bytes) -> P256Key:
        """From the 32-byte big-endian scalar."""
        return cls(_p256_from_private_bytes(private_bytes))

    def __repr__(self) -> str:
        return f"P256Key(address=0x{self.address.hex()})"

    def private_bytes(self) -> bytes:
        return _p256_private_bytes(self._private_key)

    @property
    def public_key(self) -> bytes:
        """64-byte ``x ‖ y``."""
        return p256_public_coordinates(self._private_key)

    @property
    def address(self) -> bytes:
        return address_of_coordinates(self.public_key)

    def sign_digest(self, digest: bytes) -> bytes:
        """64-byte ``r ‖ s``, low-S, ECDSA over the 32-byte digest used directly."""
        return _p256_sign_digest(self._private_key, digest)

    def custody_signature(self, digest: bytes) -> CustodySignature:
        return CustodySignature(
            signature_type=self.signature_type,
            signature=self.sign_digest(digest),
            public_key=self.public_key,
        )


class WebAuthnKey:
    """A passkey custody key (signature type 3) backed by a ``SoftwareAuthenticator``."""

    signature_type = SignatureType.WEBAUTHN

    def __init__(self, authenticator: SoftwareAuthenticator) -> None:
        self.authenticator = authenticator

    @classmethod
    def generate(cls, *, rp_id: str, origin: str | None = None) -> WebAuthnKey:
        return cls(SoftwareAuthenticator.generate(rp_id=rp_id, origin=origin))

    @classmethod
    def from_private_bytes(cls, private_bytes: bytes, *, rp_id: str, origin: str | None = None) -> WebAuthnKey:
        return cls(SoftwareAuthenticator(_p256_from_private_bytes(private_bytes), rp_id=rp_id, origin=origin))

    def __repr__(self) -> str:
        return f"WebAuthnKey(rp_id={self.authenticator.rp_id!r}, address=0x{self.address.hex()})"

    def private_bytes(self) -> bytes:
        return _p256_private_bytes(self.authenticator.private_key)

    @property
    def public_key(self) -> bytes:
        """64-byte ``x ‖ y`` of the credential."""
        return self.authenticator.public_key

    @property
    def address(self) -> bytes:
        return self.authenticator.address

    def custody_signature(self, digest: bytes) -> CustodySignature:
        """An assertion whose challenge is ``digest``, its signature normalized to 64-byte low-S ``r ‖ s``."""
        ecdsa.check_digest(digest)
        assertion = self.authenticator.get_assertion(digest)
        r, s = decode_dss_signature(assertion.signature)
        signature = ecdsa.join_raw(ecdsa.low_s(ecdsa.RS(r, s), ecdsa.P256_N))
        return CustodySignature(
            signature_type=self.signature_type,
            signature=signature,
            public_key=self.public_key,
            authenticator_data=assertion.authenticator_data,
            client_data_json=assertion.client_data_json,
        )
