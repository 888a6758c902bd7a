"""Errors to gRPC status: the one place the mapping is defined.

The interceptor (native gRPC) and the gRPC-web dispatcher both call `to_status`. Every `Reason` has its
status in `REASON_STATUS`, one total table (tests/node/server/test_status_tables.py checks that no member
is missing). A failure carries its code in the `reason-code` trailer; rejections add the values that caused
them (`reason-values`, JSON), a retryable refusal its wait (`retry-after-ms`: its own hint, else the default
of `RETRY_AFTER_DEFAULT_MS`), and an invalid read argument names its `field`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType

import grpc

from node.errors import (
    FIELD,
    REASON_CODE,
    REASON_VALUES,
    RETRY_AFTER_MS,
    ChainError,
    DataCorrupted,
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
S = grpc.StatusCode


def _table(groups: Mapping[grpc.StatusCode, tuple[Reason, ...]]) -> Mapping[Reason, grpc.StatusCode]:
    table = {reason: status for status, reasons in groups.items() for reason in reasons}
    assert len(table) == sum(len(r) for r in groups.values()), "a reason is listed under two statuses"
    return MappingProxyType(table)


REASON_STATUS: Mapping[Reason, grpc.StatusCode] = _table(
    {
        S.INVALID_ARGUMENT: (
            R.MALFORMED_MESSAGE,
            R.DATA_BYTES_MISMATCH,
            R.HASH_MISMATCH,
            R.INVALID_SIGNATURE,
            R.WRONG_NETWORK,
            R.UNKNOWN_MESSAGE_TYPE,
            R.DISABLED_MESSAGE_TYPE,
            R.BODY_MISMATCH,
            R.INVALID_FIELD,
            R.FUTURE_TIMESTAMP,
            R.STALE_TIMESTAMP,
            R.INVALID_ARGUMENT,
            R.NOT_ACCEPTABLE,
            R.UNSUPPORTED_MEDIA_TYPE,
        ),
        S.RESOURCE_EXHAUSTED: (
            R.MESSAGE_TOO_LARGE,
            R.LIMIT_EXCEEDED,
            R.QUOTA_EXCEEDED,
            R.NO_STORAGE,
            R.MEMPOOL_FULL,
            R.BATCH_TOO_LARGE,
            R.RESOURCE_EXHAUSTED,
            R.PAYLOAD_TOO_LARGE,
            R.SLOW_SUBSCRIBER,
            R.TOO_MANY_STREAMS,
        ),
        S.ALREADY_EXISTS: (R.DUPLICATE_MESSAGE, R.ALREADY_EXISTS, R.NAME_TAKEN),
        S.PERMISSION_DENIED: (
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
        ),
        S.FAILED_PRECONDITION: (
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
        ),
        S.UNAVAILABLE: (
            R.NOT_LEADER,
            R.STATE_DIVERGED,
            R.STORAGE_FAILED,
            R.DRAINING,
            R.UNAVAILABLE,
            R.BAD_GATEWAY,
            R.STREAM_GAP,
            R.HISTORY_UNAVAILABLE,
        ),
        S.NOT_FOUND: (R.NOT_FOUND,),
        S.INTERNAL: (R.INTERNAL,),
        S.DATA_LOSS: (R.DATA_CORRUPTED,),  # the store failed an integrity check: never the data
        S.ABORTED: (R.CONFLICT,),
        S.DEADLINE_EXCEEDED: (R.DEADLINE_EXCEEDED,),
        S.UNAUTHENTICATED: (R.UNAUTHENTICATED,),
        S.UNIMPLEMENTED: (R.UNIMPLEMENTED, R.METHOD_NOT_ALLOWED),
    }
)


# Retryable refusals and the wait suggested when the refusal names none (`retry-after-ms` trailer; REST turns
# it into `Retry-After`): a full mempool empties by a block, a leader is elected within a lease, a failing
# store is retried with backoff (its own hint wins), a draining node's clients go elsewhere at once.
RETRY_AFTER_DEFAULT_MS: Mapping[Reason, int] = MappingProxyType(
    {R.MEMPOOL_FULL: 1000, R.NOT_LEADER: 1000, R.STORAGE_FAILED: 1000, R.DRAINING: 100}
)


def retry_after_ms(reason: Reason, values: Mapping[str, object]) -> int | None:
    hint = values.get("retry_after_ms", RETRY_AFTER_DEFAULT_MS.get(reason))
    return None if hint is None else int(str(hint))


def reason_status(reason: Reason) -> grpc.StatusCode:
    return REASON_STATUS[reason]


def retry_trailers(reason: Reason, values: Mapping[str, object] | None = None) -> Trailers:
    """`retry-after-ms` for a retryable refusal (none otherwise)."""
    hint = retry_after_ms(reason, values or {})
    return () if hint is None else ((RETRY_AFTER_MS, str(hint)),)


def reason_trailers(reason: Reason) -> Trailers:
    """The trailers naming `reason`, with its retry hint (for a handler that aborts a call itself)."""
    return ((REASON_CODE, reason.value), *retry_trailers(reason))


def abort_args(reason: Reason, message: str) -> tuple[grpc.StatusCode, str, Trailers]:
    """`context.abort(*abort_args(reason, message))`: the status of `reason` and its trailers."""
    return reason_status(reason), message, reason_trailers(reason)


def to_status(exc: BaseException) -> tuple[grpc.StatusCode, str, Trailers]:
    if isinstance(exc, MessageRejected):
        values = json.dumps(exc.values, sort_keys=True, default=str)
        trailers: Trailers = ((REASON_CODE, exc.reason.value), (REASON_VALUES, values))
        trailers += retry_trailers(exc.reason, exc.values)  # a retryable refusal: try again after this long
        return reason_status(exc.reason), str(exc), trailers
    if isinstance(exc, NotFound):
        return abort_args(R.NOT_FOUND, str(exc))
    if isinstance(exc, InvalidArgument):
        status, message, trailers = abort_args(R.INVALID_ARGUMENT, str(exc))
        return status, message, (*trailers, (FIELD, exc.field))
    if isinstance(exc, StorageFailed):
        return abort_args(R.STORAGE_FAILED, f"storage failed: {exc}")
    if isinstance(exc, DataCorrupted):
        return abort_args(R.DATA_CORRUPTED, str(exc))
    if isinstance(exc, (InvalidBlock, InvariantBroken)):
        return abort_args(R.INTERNAL, f"internal error: {exc}")
    if isinstance(exc, ChainError):
        return abort_args(R.INTERNAL, str(exc))
    return abort_args(R.INTERNAL, "internal error")
