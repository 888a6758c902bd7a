"""A software WebAuthn authenticator for tests and development.

It behaves like a platform authenticator answering ``navigator.credentials.get()``: it holds a P-256
credential key, an RP id, the origin the "browser" reports and a signature counter, and returns real
assertions: ``authenticatorData = sha256(rp_id) ‖ flags ‖ signCount (uint32 big-endian)``,
``clientDataJSON = {"type":"webauthn.get","challenge":<base64url>,"origin":<origin>,"crossOrigin":false}``
and a DER-encoded ECDSA P-256 signature over ``authenticatorData ‖ sha256(clientDataJSON)``.

Like real authenticators it does not normalize S, so about half of its signatures are high-S; the node
accepts only low-S, so ``node.sdk.keys.WebAuthnKey`` normalizes before submitting.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from node.crypto.address import address_of_coordinates
from node.crypto.hashing import sha256
from node.crypto.webauthn import ASSERTION_TYPE, FLAG_UP, FLAG_UV, base64url

COUNTER_MODULUS = 1 << 32


class Assertion(NamedTuple):
    """What ``navigator.credentials.get()`` hands back (the parts a verifier needs)."""

    authenticator_data: bytes
    client_data_json: bytes
    signature: bytes


def p256_public_coordinates(key: ec.EllipticCurvePrivateKey) -> bytes:
    """64-byte ``x ‖ y`` of a P-256 private key's public point."""
    numbers = key.public_key().public_numbers()
    return numbers.x.to_bytes(32, "big") + numbers.y.to_bytes(32, "big")


class SoftwareAuthenticator:
    """One P-256 WebAuthn credential scoped to ``rp_id``, used from ``origin``.

    ``user_present`` / ``user_verified`` set the UP / UV flags (both true for a real passkey with user
    verification); tests turn them off to produce assertions the node must reject.
    """

    def __init__(
        self,
        private_key: ec.EllipticCurvePrivateKey,
        *,
        rp_id: str,
        origin: str | None = None,
        sign_count: int = 0,
        user_present: bool = True,
        user_verified: bool = True,
    ) -> None:
        if not isinstance(private_key.curve, ec.SECP256R1):
            raise ValueError("a WebAuthn credential here is a P-256 key")
        if not 0 <= sign_count < COUNTER_MODULUS:
            raise ValueError(f"sign_count must fit in uint32, got {sign_count}")
        self._private_key = private_key
        self.rp_id = rp_id
        self.origin = origin if origin is not None else f"https://{rp_id}"
        self._sign_count = sign_count
        self.user_present = user_present
        self.user_verified = user_verified

    @classmethod
    def generate(cls, *, rp_id: str, origin: str | None = None) -> SoftwareAuthenticator:
        """A fresh credential."""
        return cls(ec.generate_private_key(ec.SECP256R1()), rp_id=rp_id, origin=origin)

    def __repr__(self) -> str:
        address = self.address.hex()
        return f"SoftwareAuthenticator(rp_id={self.rp_id!r}, origin={self.origin!r}, address=0x{address})"

    @property
    def private_key(self) -> ec.EllipticCurvePrivateKey:
        return self._private_key

    @property
    def public_key(self) -> bytes:
        """64-byte ``x ‖ y`` (the credential public key as the chain stores it)."""
        return p256_public_coordinates(self._private_key)

    @property
    def address(self) -> bytes:
        return address_of_coordinates(self.public_key)

    @property
    def sign_count(self) -> int:
        return self._sign_count

    def flags(self) -> int:
        return (FLAG_UP if self.user_present else 0) | (FLAG_UV if self.user_verified else 0)

    def authenticator_data(self) -> bytes:
        """Advance the counter and build the 37-byte authenticator data of an assertion."""
        self._sign_count = (self._sign_count + 1) % COUNTER_MODULUS
        return sha256(self.rp_id.encode("utf-8")) + bytes([self.flags()]) + self._sign_count.to_bytes(4, "big")

    def client_data_json(self, challenge: bytes) -> bytes:
        """The compact clientDataJSON a browser produces for ``challenge`` at ``origin``."""
        client_data = {
            "type": ASSERTION_TYPE,
            "challenge": base64url(challenge),
            "origin": self.origin,
            "crossOrigin": False,
        }
        return json.dumps(client_data, separators=(",", ":")).encode("utf-8")

    def sign(self, authenticator_data: bytes, client_data_json: bytes) -> bytes:
        """DER ECDSA P-256 over ``authenticatorData ‖ sha256(clientDataJSON)`` (S not normalized)."""
        signed = authenticator_data + sha256(client_data_json)
        return self._private_key.sign(signed, ec.ECDSA(hashes.SHA256()))

    def get_assertion(self, challenge: bytes) -> Assertion:
        """A complete assertion over ``challenge``."""
        authenticator_data = self.authenticator_data()
        client_data_json = self.client_data_json(challenge)
        return Assertion(authenticator_data, client_data_json, self.sign(authenticator_data, client_data_json))
