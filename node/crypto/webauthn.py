"""Relying-party checks of a WebAuthn assertion that signs a custody digest.

``node.crypto.custody`` first decodes the signature (64-byte ``r ‖ s``, or strict DER), requires
``0 < r < n`` and ``0 < s <= n/2`` (MALFORMED_SIGNATURE / HIGH_S_SIGNATURE) and loads the P-256 public
key (MALFORMED_SIGNATURE). Then the assertion is accepted for ``digest`` under a ``WebAuthnPolicy`` when,
in this order:

1. ``clientDataJSON`` is UTF-8 JSON, an object without duplicate keys;
2. its ``type`` is ``"webauthn.get"``                                        (else WEBAUTHN_TYPE);
3. its ``challenge`` equals base64url-without-padding(digest), exactly      (else WEBAUTHN_CHALLENGE);
4. its ``origin`` is allowed by the policy, and ``crossOrigin`` is not true (else WEBAUTHN_ORIGIN);
5. ``authenticatorData`` has at least 37 bytes and its rpIdHash (first 32 bytes) is
   sha256(policy.rp_id)                                                     (else WEBAUTHN_RP_ID);
6. the flags byte has both UP (0x01) and UV (0x04) set                      (else WEBAUTHN_FLAGS);
7. the P-256 signature verifies over sha256(authenticatorData ‖ sha256(clientDataJSON))
                                                                            (else INVALID_SIGNATURE).

Structural faults (bad JSON, short authenticator data, undecodable signature) are MALFORMED_SIGNATURE.
The signature counter is not checked: the node keeps no per-credential counter (custody nonces already
prevent replay).

Origin rules (``WebAuthnPolicy.allows_origin``): an origin is allowed if it is in ``allowed_origins``.
When ``allowed_origins`` is empty, the allowed origins are derived from ``rp_id``: exactly
``https://<rp_id>`` or ``https://<sub>.<rp_id>`` where ``<sub>`` is one or more DNS labels (lowercase
letters, digits and inner hyphens), with no port, path or trailing slash; and, only when ``rp_id`` is
``localhost``, also ``http://localhost`` and ``http://localhost:<port>``. Comparison is exact and
case-sensitive (browsers serialize origins in lowercase).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any

from node.crypto.errors import CustodyReason, CustodySignatureError
from node.crypto.hashing import sha256

ASSERTION_TYPE = "webauthn.get"
RP_ID_HASH_SIZE = 32
MIN_AUTHENTICATOR_DATA_SIZE = 37
FLAG_UP = 0x01
FLAG_UV = 0x04
LOCALHOST = "localhost"
_LABELS = r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+"
_LOCALHOST_ORIGIN = re.compile(r"http://localhost(?::([1-9][0-9]{0,4}))?")
MAX_PORT = 65535
COSE_ES256 = -7  # the one COSE algorithm (ECDSA P-256 with SHA-256) a passkey custody key may use


@dataclass(frozen=True)
class WebAuthnPolicy:
    """Which relying party and origins the node accepts WebAuthn custody signatures from."""

    rp_id: str
    allowed_origins: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not self.rp_id or self.rp_id != self.rp_id.strip().lower():
            raise ValueError(f"rp_id must be a non-empty lowercase host name, got {self.rp_id!r}")

    @property
    def rp_id_hash(self) -> bytes:
        return sha256(self.rp_id.encode("utf-8"))

    def allows_origin(self, origin: str) -> bool:
        """The origin rules documented in this module."""
        if self.allowed_origins:
            return origin in self.allowed_origins
        if origin == f"https://{self.rp_id}":
            return True
        if re.fullmatch(rf"https://{_LABELS}{re.escape(self.rp_id)}", origin):
            return True
        if self.rp_id == LOCALHOST:
            match = _LOCALHOST_ORIGIN.fullmatch(origin)
            if match is not None:
                return match.group(1) is None or int(match.group(1)) <= MAX_PORT
        return False


def base64url(data: bytes) -> str:
    """base64url without padding, as WebAuthn encodes the challenge in clientDataJSON."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _reject(reason: CustodyReason, detail: str) -> CustodySignatureError:
    return CustodySignatureError(reason, detail)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key in clientDataJSON")
    return dict(pairs)


def parse_client_data(client_data_json: bytes) -> dict[str, Any]:
    """The clientDataJSON object; MALFORMED_SIGNATURE unless it is a UTF-8 JSON object with unique keys."""
    try:
        parsed = json.loads(client_data_json.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise _reject(CustodyReason.MALFORMED_SIGNATURE, f"clientDataJSON: {error}") from None
    if not isinstance(parsed, dict):
        raise _reject(CustodyReason.MALFORMED_SIGNATURE, "clientDataJSON is not a JSON object")
    return parsed


def check_client_data(client_data: dict[str, Any], digest: bytes, policy: WebAuthnPolicy) -> None:
    """Steps 2-4: type, challenge, origin."""
    kind = client_data.get("type")
    if kind != ASSERTION_TYPE:
        raise _reject(CustodyReason.WEBAUTHN_TYPE, f"type must be {ASSERTION_TYPE!r}, got {kind!r}")
    challenge = client_data.get("challenge")
    expected = base64url(digest)
    if challenge != expected:
        raise _reject(CustodyReason.WEBAUTHN_CHALLENGE, f"challenge {challenge!r} != {expected!r}")
    origin = client_data.get("origin")
    if not isinstance(origin, str) or not policy.allows_origin(origin):
        raise _reject(CustodyReason.WEBAUTHN_ORIGIN, f"origin {origin!r} not allowed for {policy.rp_id!r}")
    if client_data.get("crossOrigin", False) is not False:
        raise _reject(CustodyReason.WEBAUTHN_ORIGIN, "cross-origin assertions are not accepted")


def check_authenticator_data(authenticator_data: bytes, policy: WebAuthnPolicy) -> None:
    """Steps 5-6: length, rpIdHash, UP and UV flags."""
    if len(authenticator_data) < MIN_AUTHENTICATOR_DATA_SIZE:
        raise _reject(
            CustodyReason.MALFORMED_SIGNATURE,
            f"authenticatorData has {len(authenticator_data)} bytes, needs at least {MIN_AUTHENTICATOR_DATA_SIZE}",
        )
    if authenticator_data[:RP_ID_HASH_SIZE] != policy.rp_id_hash:
        raise _reject(CustodyReason.WEBAUTHN_RP_ID, f"rpIdHash is not sha256({policy.rp_id!r})")
    flags = authenticator_data[RP_ID_HASH_SIZE]
    if flags & (FLAG_UP | FLAG_UV) != FLAG_UP | FLAG_UV:
        raise _reject(CustodyReason.WEBAUTHN_FLAGS, f"flags 0x{flags:02x} lack UP (0x01) and/or UV (0x04)")


def signed_message(authenticator_data: bytes, client_data_json: bytes) -> bytes:
    """What the authenticator signs, hashed: sha256(authenticatorData ‖ sha256(clientDataJSON))."""
    return sha256(authenticator_data + sha256(client_data_json))


def check_assertion(authenticator_data: bytes, client_data_json: bytes, digest: bytes, policy: WebAuthnPolicy) -> bytes:
    """Steps 1-6; returns the 32-byte hash the P-256 signature must verify over (step 7)."""
    check_client_data(parse_client_data(client_data_json), digest, policy)
    check_authenticator_data(authenticator_data, policy)
    return signed_message(authenticator_data, client_data_json)
