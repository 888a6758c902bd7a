"""Typed errors with stable reason codes.

One root per layer: `MessageRejected` (a message is invalid: structure,
signature or state), `NotFound` (a read for something absent), `InvalidBlock`
(a block does not match what applying it produced), `InvariantBroken` (a bug).
The transport layers map them to gRPC and HTTP status in one place each.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Reason(StrEnum):
    """Stable rejection codes (part of the public interface; never renamed)."""

    # envelope / structure
    MALFORMED_MESSAGE = "MALFORMED_MESSAGE"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    DATA_BYTES_MISMATCH = "DATA_BYTES_MISMATCH"
    HASH_MISMATCH = "HASH_MISMATCH"
    INVALID_SIGNATURE = "INVALID_SIGNATURE"
    WRONG_NETWORK = "WRONG_NETWORK"
    UNKNOWN_MESSAGE_TYPE = "UNKNOWN_MESSAGE_TYPE"
    DISABLED_MESSAGE_TYPE = "DISABLED_MESSAGE_TYPE"
    BODY_MISMATCH = "BODY_MISMATCH"
    INVALID_FIELD = "INVALID_FIELD"
    # time
    FUTURE_TIMESTAMP = "FUTURE_TIMESTAMP"
    STALE_TIMESTAMP = "STALE_TIMESTAMP"
    # replay and conflicts
    DUPLICATE_MESSAGE = "DUPLICATE_MESSAGE"
    STALE_UPDATE = "STALE_UPDATE"
    TOMBSTONED = "TOMBSTONED"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    NOT_PRESENT = "NOT_PRESENT"
    # authorization
    UNKNOWN_SIGNER = "UNKNOWN_SIGNER"
    INSUFFICIENT_SCOPE = "INSUFFICIENT_SCOPE"
    PROJECT_NOT_ALLOWED = "PROJECT_NOT_ALLOWED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    # custody
    CUSTODY_SIGNATURE_INVALID = "CUSTODY_SIGNATURE_INVALID"
    CUSTODY_KEY_UNKNOWN = "CUSTODY_KEY_UNKNOWN"
    CUSTODY_KEY_REVOKED = "CUSTODY_KEY_REVOKED"
    CUSTODY_KEY_EXPIRED = "CUSTODY_KEY_EXPIRED"
    CUSTODY_KEY_NOT_ADMIN = "CUSTODY_KEY_NOT_ADMIN"
    NONCE_MISMATCH = "NONCE_MISMATCH"
    AUTH_WINDOW_INVALID = "AUTH_WINDOW_INVALID"
    AUTH_EXPIRED = "AUTH_EXPIRED"
    AUTH_NOT_YET_VALID = "AUTH_NOT_YET_VALID"
    # projects and git objects
    PROJECT_NOT_FOUND = "PROJECT_NOT_FOUND"
    PROJECT_ARCHIVED = "PROJECT_ARCHIVED"
    PROJECT_REMOVED = "PROJECT_REMOVED"
    NAME_TAKEN = "NAME_TAKEN"
    REF_NONCE_MISMATCH = "REF_NONCE_MISMATCH"
    REF_HASH_MISMATCH = "REF_HASH_MISMATCH"
    REF_NOT_FOUND = "REF_NOT_FOUND"
    NOT_FAST_FORWARD = "NOT_FAST_FORWARD"
    COMMIT_NOT_FOUND = "COMMIT_NOT_FOUND"
    MERGE_REQUEST_NOT_FOUND = "MERGE_REQUEST_NOT_FOUND"
    # limits and quotas
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    NO_STORAGE = "NO_STORAGE"
    NOT_STORAGE_AUTHORITY = "NOT_STORAGE_AUTHORITY"
    # submission pipeline
    MEMPOOL_FULL = "MEMPOOL_FULL"
    BATCH_TOO_LARGE = "BATCH_TOO_LARGE"
    NOT_LEADER = "NOT_LEADER"
    # the node cannot write its store (disk full, I/O error): retry later or elsewhere (`retry-after-ms`)
    STORAGE_FAILED = "STORAGE_FAILED"
    # the node is shutting down: streams end with this; reconnect to another node and resume
    DRAINING = "DRAINING"
    # replicated mode: this node's state differs from the log's (it stopped taking writes)
    STATE_DIVERGED = "STATE_DIVERGED"


class ChainError(Exception):
    """Root of every error the node raises on purpose."""


class MessageRejected(ChainError):
    """A message is invalid; carries a stable reason code and the values that caused it."""

    def __init__(self, reason: Reason, detail: str = "", **values: Any) -> None:
        self.reason = reason
        self.detail = detail
        self.values = values
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageRejected) and (self.reason, self.detail, self.values) == (
            other.reason,
            other.detail,
            other.values,
        )

    def __hash__(self) -> int:
        return hash((self.reason, self.detail))


class NotFound(ChainError):
    """A read asked for something that does not exist."""

    def __init__(self, what: str, key: str = "") -> None:
        self.what = what
        self.key = key
        super().__init__(f"{what} not found" + (f": {key}" if key else ""))


class InvalidArgument(ChainError):
    """A read request is malformed (bad address length, bad page token, ...)."""

    def __init__(self, field: str, detail: str) -> None:
        self.field = field
        self.detail = detail
        super().__init__(f"{field}: {detail}")


class InvalidBlock(ChainError):
    """Applying a block did not reproduce its header (count or state root)."""

    def __init__(self, number: int, field: str, expected: str, got: str) -> None:
        self.number = number
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(f"block {number}: {field} expected {expected}, got {got}")


class StorageFailed(ChainError):
    """Writing to the store failed (disk full, I/O error); nothing of that write was committed."""


class InvariantBroken(ChainError):
    """Internal state is inconsistent: a bug, never user input."""
