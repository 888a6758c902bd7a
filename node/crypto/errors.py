"""The typed rejection of a custody signature and its stable reason codes."""

from __future__ import annotations

from enum import StrEnum


class CustodyReason(StrEnum):
    """Stable reason codes of ``CustodySignatureError`` (values are the wire/API codes)."""

    INVALID_SIGNATURE = "INVALID_SIGNATURE"
    UNSUPPORTED_SIGNATURE_TYPE = "UNSUPPORTED_SIGNATURE_TYPE"
    MALFORMED_SIGNATURE = "MALFORMED_SIGNATURE"
    HIGH_S_SIGNATURE = "HIGH_S_SIGNATURE"
    WEBAUTHN_FLAGS = "WEBAUTHN_FLAGS"
    WEBAUTHN_TYPE = "WEBAUTHN_TYPE"
    WEBAUTHN_CHALLENGE = "WEBAUTHN_CHALLENGE"
    WEBAUTHN_ORIGIN = "WEBAUTHN_ORIGIN"
    WEBAUTHN_RP_ID = "WEBAUTHN_RP_ID"


class CustodySignatureError(Exception):
    """A custody signature was rejected.

    ``reason`` is one of ``CustodyReason`` (a ``str``, so it compares equal to the plain code);
    ``detail`` is a human-readable explanation with the offending values, not meant to be parsed.
    """

    def __init__(self, reason: CustodyReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason: CustodyReason = reason
        self.detail: str = detail

    def __reduce__(self) -> tuple[type[CustodySignatureError], tuple[CustodyReason, str]]:
        return (type(self), (self.reason, self.detail))
