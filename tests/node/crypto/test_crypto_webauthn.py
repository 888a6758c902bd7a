"""WebAuthn custody signatures (type 3): relying-party checks and tamper resistance."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from node.crypto import ecdsa
from node.crypto.custody import CustodySignature, SignatureType, verify_custody_signature
from node.crypto.errors import CustodyReason
from node.crypto.webauthn import WebAuthnPolicy, base64url
from node.sdk.webauthn import SoftwareAuthenticator
from tests.node.crypto.custody_helpers import (
    DIGEST,
    POLICY,
    RP_ID,
    assert_rejected,
    der_to_low_s_raw,
    flip,
    flips,
    high_s_raw,
    reason_of,
    replace,
)


@pytest.fixture
def authenticator() -> SoftwareAuthenticator:
    return SoftwareAuthenticator.generate(rp_id=RP_ID)


def assertion_signature(
    authenticator: SoftwareAuthenticator,
    digest: bytes = DIGEST,
    *,
    client_data: dict[str, object] | None = None,
    authenticator_data: bytes | None = None,
) -> CustodySignature:
    """A type-3 signature; ``client_data`` / ``authenticator_data`` override what the browser would send."""
    auth_data = authenticator_data if authenticator_data is not None else authenticator.authenticator_data()
    if client_data is None:
        client_json = authenticator.client_data_json(digest)
    else:
        client_json = json.dumps(client_data, separators=(",", ":")).encode()
    return CustodySignature(
        signature_type=SignatureType.WEBAUTHN,
        signature=der_to_low_s_raw(authenticator.sign(auth_data, client_json)),
        public_key=authenticator.public_key,
        authenticator_data=auth_data,
        client_data_json=client_json,
    )


def client_data(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "type": "webauthn.get",
        "challenge": base64url(DIGEST),
        "origin": f"https://{RP_ID}",
        "crossOrigin": False,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def test_software_assertion_accepted(authenticator: SoftwareAuthenticator) -> None:
    signature = assertion_signature(authenticator)
    assert verify_custody_signature(signature, DIGEST, webauthn_policy=POLICY) == authenticator.address


def test_65_byte_public_key_accepted(authenticator: SoftwareAuthenticator) -> None:
    signature = replace(assertion_signature(authenticator), public_key=b"\x04" + authenticator.public_key)
    assert verify_custody_signature(signature, DIGEST, webauthn_policy=POLICY) == authenticator.address


def test_low_s_der_accepted_high_s_der_rejected(authenticator: SoftwareAuthenticator) -> None:
    signature = assertion_signature(authenticator)
    rs = ecdsa.split_raw(signature.signature)
    low_der = encode_dss_signature(rs.r, rs.s)
    high_der = encode_dss_signature(rs.r, ecdsa.P256_N - rs.s)
    accepted = verify_custody_signature(replace(signature, signature=low_der), DIGEST, webauthn_policy=POLICY)
    assert accepted == authenticator.address
    assert reason_of(replace(signature, signature=high_der), DIGEST) == CustodyReason.HIGH_S_SIGNATURE


def test_high_s_raw_rejected(authenticator: SoftwareAuthenticator) -> None:
    signature = assertion_signature(authenticator)
    twin = replace(signature, signature=high_s_raw(signature.signature, ecdsa.P256_N))
    assert reason_of(twin, DIGEST) == CustodyReason.HIGH_S_SIGNATURE


def test_non_canonical_der_is_malformed(authenticator: SoftwareAuthenticator) -> None:
    signature = assertion_signature(authenticator)
    rs = ecdsa.split_raw(signature.signature)
    der = encode_dss_signature(rs.r, rs.s)
    assert decode_dss_signature(der) == (rs.r, rs.s)
    for bad in (der + b"\x00", der[:-1], b"\x31" + der[1:], b"\x30\x81" + der[1:]):
        assert reason_of(replace(signature, signature=bad), DIGEST) == CustodyReason.MALFORMED_SIGNATURE


@pytest.mark.parametrize("kind", ["webauthn.create", "webauthn.GET", "", None, 1])
def test_wrong_type(authenticator: SoftwareAuthenticator, kind: object) -> None:
    signature = assertion_signature(authenticator, client_data=client_data(type=kind))
    assert reason_of(signature, DIGEST) == CustodyReason.WEBAUTHN_TYPE


@pytest.mark.parametrize(
    "challenge",
    [
        base64url(b"\x00" * 32),
        base64url(DIGEST) + "=",
        base64url(DIGEST)[:-1],
        DIGEST.hex(),
        base64url(DIGEST).upper(),
        None,
    ],
)
def test_wrong_challenge(authenticator: SoftwareAuthenticator, challenge: str | None) -> None:
    data = client_data(challenge=challenge)
    assert reason_of(assertion_signature(authenticator, client_data=data), DIGEST) == CustodyReason.WEBAUTHN_CHALLENGE


def test_signature_over_another_digest_fails_the_challenge(authenticator: SoftwareAuthenticator) -> None:
    signature = assertion_signature(authenticator, b"\x07" * 32)
    assert reason_of(signature, DIGEST) == CustodyReason.WEBAUTHN_CHALLENGE


@pytest.mark.parametrize(
    "origin",
    ["https://evil.example", f"http://{RP_ID}", f"https://{RP_ID}:8443", f"https://{RP_ID}/", "null", 7, None],
)
def test_wrong_origin(authenticator: SoftwareAuthenticator, origin: object) -> None:
    data = client_data(origin=origin)
    assert reason_of(assertion_signature(authenticator, client_data=data), DIGEST) == CustodyReason.WEBAUTHN_ORIGIN


def test_wrong_origin_from_a_misconfigured_authenticator() -> None:
    authenticator = SoftwareAuthenticator.generate(rp_id=RP_ID, origin="https://phish.example")
    assert reason_of(assertion_signature(authenticator), DIGEST) == CustodyReason.WEBAUTHN_ORIGIN


@pytest.mark.parametrize("cross_origin", [True, "false", 0])
def test_cross_origin_rejected(authenticator: SoftwareAuthenticator, cross_origin: object) -> None:
    data = client_data(crossOrigin=cross_origin)
    assert reason_of(assertion_signature(authenticator, client_data=data), DIGEST) == CustodyReason.WEBAUTHN_ORIGIN


def test_missing_cross_origin_is_fine(authenticator: SoftwareAuthenticator) -> None:
    data = {k: v for k, v in client_data().items() if k != "crossOrigin"}
    signature = assertion_signature(authenticator, client_data=data)
    assert verify_custody_signature(signature, DIGEST, webauthn_policy=POLICY) == authenticator.address


def test_extra_client_data_members_are_ignored(authenticator: SoftwareAuthenticator) -> None:
    data = client_data(other_keys_can_be_added_here="do not compare clientDataJSON against a template")
    signature = assertion_signature(authenticator, client_data=data)
    assert verify_custody_signature(signature, DIGEST, webauthn_policy=POLICY) == authenticator.address


def test_wrong_rp_id() -> None:
    authenticator = SoftwareAuthenticator.generate(rp_id="other.example", origin=f"https://{RP_ID}")
    assert reason_of(assertion_signature(authenticator), DIGEST) == CustodyReason.WEBAUTHN_RP_ID


@pytest.mark.parametrize(("present", "verified"), [(False, True), (True, False), (False, False)])
def test_missing_flags(present: bool, verified: bool) -> None:
    authenticator = SoftwareAuthenticator.generate(rp_id=RP_ID)
    authenticator.user_present = present
    authenticator.user_verified = verified
    assert reason_of(assertion_signature(authenticator), DIGEST) == CustodyReason.WEBAUTHN_FLAGS


def test_other_flags_and_extensions_are_covered_by_the_signature(authenticator: SoftwareAuthenticator) -> None:
    auth_data = authenticator.authenticator_data()
    with_extension_flag = auth_data[:32] + bytes([auth_data[32] | 0x80]) + auth_data[33:] + b"\xa0"
    signature = assertion_signature(authenticator, authenticator_data=with_extension_flag)
    assert verify_custody_signature(signature, DIGEST, webauthn_policy=POLICY) == authenticator.address


@pytest.mark.parametrize("size", [0, 32, 33, 36])
def test_short_authenticator_data(authenticator: SoftwareAuthenticator, size: int) -> None:
    auth_data = authenticator.authenticator_data()[:size]
    assert reason_of(assertion_signature(authenticator, authenticator_data=auth_data), DIGEST) == (
        CustodyReason.MALFORMED_SIGNATURE
    )


@pytest.mark.parametrize(
    "raw_client_data",
    [b"", b"not json", b"[]", b'"webauthn.get"', b"\xff\xfe", b'{"type":"webauthn.get","type":"webauthn.get"}'],
)
def test_malformed_client_data(authenticator: SoftwareAuthenticator, raw_client_data: bytes) -> None:
    signature = replace(assertion_signature(authenticator), client_data_json=raw_client_data)
    assert reason_of(signature, DIGEST) == CustodyReason.MALFORMED_SIGNATURE


def test_every_tampered_byte_rejected(authenticator: SoftwareAuthenticator) -> None:
    signature = assertion_signature(authenticator)
    address = authenticator.address
    for field in ("authenticator_data", "client_data_json", "signature", "public_key"):
        original: bytes = getattr(signature, field)
        for _, _, tampered in flips(original):
            assert_rejected(replace(signature, **{field: tampered}), DIGEST, address)
    for _, _, tampered in flips(DIGEST):
        assert_rejected(signature, tampered, address)


def test_tampered_der_signature_rejected(authenticator: SoftwareAuthenticator) -> None:
    signature = assertion_signature(authenticator)
    rs = ecdsa.split_raw(signature.signature)
    der = replace(signature, signature=encode_dss_signature(rs.r, rs.s))
    for position in range(len(der.signature)):
        for mask in (0x01, 0x80, 0xFF):
            assert_rejected(replace(der, signature=flip(der.signature, position, mask)), DIGEST, authenticator.address)


def test_wrong_policy_rp_id(authenticator: SoftwareAuthenticator) -> None:
    other = WebAuthnPolicy(rp_id="other.example", allowed_origins=frozenset({f"https://{RP_ID}"}))
    assert reason_of(assertion_signature(authenticator), DIGEST, other) == CustodyReason.WEBAUTHN_RP_ID


ORIGIN_CASES = [
    # (rp_id, allowed_origins, origin, allowed)
    ("example.com", (), "https://example.com", True),
    ("example.com", (), "https://app.example.com", True),
    ("example.com", (), "https://a.b-c.example.com", True),
    ("example.com", (), "http://example.com", False),
    ("example.com", (), "https://example.com:443", False),
    ("example.com", (), "https://example.com/", False),
    ("example.com", (), "https://evilexample.com", False),
    ("example.com", (), "https://example.com.evil.net", False),
    ("example.com", (), "https://.example.com", False),
    ("example.com", (), "https://-a.example.com", False),
    ("example.com", (), "https://APP.example.com", False),
    ("example.com", (), "https://example.comx", False),
    ("example.com", (), "https://xexample.com", False),
    ("example.com", (), "http://localhost:3000", False),
    ("localhost", (), "http://localhost", True),
    ("localhost", (), "http://localhost:3000", True),
    ("localhost", (), "http://localhost:65535", True),
    ("localhost", (), "http://localhost:65536", False),
    ("localhost", (), "http://localhost:0", False),
    ("localhost", (), "http://localhost:", False),
    ("localhost", (), "https://localhost", True),
    ("localhost", (), "http://127.0.0.1:3000", False),
    ("localhost", (), "http://localhost.evil.net", False),
    ("example.com", ("https://wallet.partner.io",), "https://wallet.partner.io", True),
    ("example.com", ("https://wallet.partner.io",), "https://example.com", False),
    ("example.com", ("https://wallet.partner.io",), "https://app.example.com", False),
]


@pytest.mark.parametrize(("rp_id", "allowed", "origin", "expected"), ORIGIN_CASES)
def test_origin_rules(rp_id: str, allowed: tuple[str, ...], origin: str, expected: bool) -> None:
    policy = WebAuthnPolicy(rp_id=rp_id, allowed_origins=frozenset(allowed))
    assert policy.allows_origin(origin) is expected


def test_explicit_origin_end_to_end() -> None:
    authenticator = SoftwareAuthenticator.generate(rp_id=RP_ID, origin="https://wallet.partner.io")
    policy = WebAuthnPolicy(rp_id=RP_ID, allowed_origins=frozenset({"https://wallet.partner.io"}))
    signature = assertion_signature(authenticator)
    assert verify_custody_signature(signature, DIGEST, webauthn_policy=policy) == authenticator.address
    assert reason_of(signature, DIGEST, POLICY) == CustodyReason.WEBAUTHN_ORIGIN


@pytest.mark.parametrize("rp_id", ["", "Example.com", " example.com"])
def test_policy_rp_id_must_be_normalized(rp_id: str) -> None:
    with pytest.raises(ValueError, match="rp_id"):
        WebAuthnPolicy(rp_id=rp_id)
