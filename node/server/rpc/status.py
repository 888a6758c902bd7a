"""Errors to gRPC status: the one place the mapping is defined.

The interceptor (native gRPC) and the gRPC-web dispatcher both call
`to_status`. Rejections carry their reason code in trailing metadata
(`reason-code`) and the values that caused them (`reason-values`, JSON).
"""

from __future__ import annotations

import json

import grpc

from node.errors import (
    ChainError,
    InvalidArgument,
    InvalidBlock,
    InvariantBroken,
    MessageRejected,
    NotFound,
    Reason,
    StorageFailed,
)

Trailers = tuple[tuple[str, str], ...]

R = Reason
RESOURCE = {R.MESSAGE_TOO_LARGE, R.LIMIT_EXCEEDED, R.QUOTA_EXCEEDED, R.NO_STORAGE, R.MEMPOOL_FULL, R.BATCH_TOO_LARGE}
EXISTS = {R.DUPLICATE_MESSAGE, R.ALREADY_EXISTS, R.NAME_TAKEN}
DENIED = {
    R.UNKNOWN_SIGNER,
    R.INSUFFICIENT_SCOPE,
    R.PROJECT_NOT_ALLOWED,
    R.PERMISSION_DENIED,
    R.CUSTODY_SIGNATURE_INVALID,
    R.CUSTODY_KEY_UNKNOWN,
    R.CUSTODY_KEY_REVOKED,
    R.CUSTODY_KEY_EXPIRED,
    R.CUSTODY_KEY_NOT_ADMIN,
    R.NOT_STORAGE_AUTHORITY,
}
PRECONDITION = {
    R.STALE_UPDATE,
    R.TOMBSTONED,
    R.NOT_PRESENT,
    R.NONCE_MISMATCH,
    R.AUTH_WINDOW_INVALID,
    R.AUTH_EXPIRED,
    R.AUTH_NOT_YET_VALID,
    R.PROJECT_NOT_FOUND,
    R.PROJECT_ARCHIVED,
    R.PROJECT_REMOVED,
    R.REF_NONCE_MISMATCH,
    R.REF_HASH_MISMATCH,
    R.REF_NOT_FOUND,
    R.NOT_FAST_FORWARD,
    R.COMMIT_NOT_FOUND,
    R.MERGE_REQUEST_NOT_FOUND,
}


# Retryable refusals and the wait suggested when the refusal names none (`retry-after-ms` trailer; REST turns
# it into `Retry-After`): a full mempool empties by a block, a leader is elected within a lease, a failing
# store is retried with backoff (its own hint wins), a draining node's clients go elsewhere at once.
RETRY_AFTER_MS = {R.MEMPOOL_FULL: 1000, R.NOT_LEADER: 1000, R.STORAGE_FAILED: 1000, R.DRAINING: 100}


def retry_after_ms(reason: Reason, values: dict[str, object]) -> int | None:
    hint = values.get("retry_after_ms", RETRY_AFTER_MS.get(reason))
    return None if hint is None else int(str(hint))


def reason_status(reason: Reason) -> grpc.StatusCode:
    if reason in RESOURCE:
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    if reason in EXISTS:
        return grpc.StatusCode.ALREADY_EXISTS
    if reason in DENIED:
        return grpc.StatusCode.PERMISSION_DENIED
    if reason in PRECONDITION:
        return grpc.StatusCode.FAILED_PRECONDITION
    if reason in (R.NOT_LEADER, R.STATE_DIVERGED, R.STORAGE_FAILED, R.DRAINING):
        return grpc.StatusCode.UNAVAILABLE
    return grpc.StatusCode.INVALID_ARGUMENT


def to_status(exc: BaseException) -> tuple[grpc.StatusCode, str, Trailers]:
    if isinstance(exc, MessageRejected):
        values = json.dumps(exc.values, sort_keys=True, default=str)
        trailers: Trailers = (("reason-code", exc.reason.value), ("reason-values", values))
        hint = retry_after_ms(exc.reason, exc.values)
        if hint is not None:  # a retryable refusal: try again after this long
            trailers += (("retry-after-ms", str(hint)),)
        return reason_status(exc.reason), str(exc), trailers
    if isinstance(exc, NotFound):
        return grpc.StatusCode.NOT_FOUND, str(exc), (("reason-code", "NOT_FOUND"),)
    if isinstance(exc, InvalidArgument):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc), (("reason-code", "INVALID_ARGUMENT"), ("field", exc.field))
    if isinstance(exc, StorageFailed):
        trailers = (("reason-code", R.STORAGE_FAILED.value), ("retry-after-ms", str(RETRY_AFTER_MS[R.STORAGE_FAILED])))
        return grpc.StatusCode.UNAVAILABLE, f"storage failed: {exc}", trailers
    if isinstance(exc, (InvalidBlock, InvariantBroken)):
        return grpc.StatusCode.INTERNAL, f"internal error: {exc}", (("reason-code", "INTERNAL"),)
    if isinstance(exc, ChainError):
        return grpc.StatusCode.INTERNAL, str(exc), (("reason-code", "INTERNAL"),)
    return grpc.StatusCode.INTERNAL, "internal error", (("reason-code", "INTERNAL"),)
