"""The typed rejection of a custody signature; its reason codes are `CustodyReason` (node/errors.py)."""

from __future__ import annotations

from node.errors import CustodyReason

__all__ = ["CustodyReason", "CustodySignatureError"]


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
