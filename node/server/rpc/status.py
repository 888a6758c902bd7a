"""Errors to gRPC status: the one place the mapping is defined.

The interceptor (native gRPC) and the gRPC-web dispatcher both call `to_status`. Every `Reason` has its
status in `REASON_STATUS`: its category's gRPC status in node/reasons.py, the one table the gateway's HTTP
statuses come from too (tests/node/server/test_status_tables.py checks that no member is missing). A
failure carries its code in the `reason-code` trailer; rejections add the values that caused them
(`reason-values`, JSON; for a message GetMessage finds dropped, MESSAGE_DROPPED, its reason and height), a
retryable refusal its wait (`retry-after-ms`: its own hint, else the default of `RETRY_AFTER_DEFAULT_MS`),
and an invalid read argument names its `field`.
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
    MessageDropped,
    MessageRejected,
    NotFound,
    Reason,
    StatePruned,
    StorageFailed,
)
from node.reasons import CATEGORY

Trailers = tuple[tuple[str, str], ...]

R = Reason

# Every reason's gRPC status: its category's (node/reasons.py, the one table both transports read).
REASON_STATUS: Mapping[Reason, grpc.StatusCode] = MappingProxyType(
    {reason: grpc.StatusCode[category.value.grpc] for reason, category in CATEGORY.items()}
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
    if isinstance(exc, MessageDropped):  # admitted, then dropped: why and where, as a rejection's values
        dropped = {"hash": exc.message_hash, "reason": exc.reason, "detail": exc.detail, "height": exc.height}
        trailers = ((REASON_CODE, R.MESSAGE_DROPPED.value), (REASON_VALUES, json.dumps(dropped, sort_keys=True)))
        return reason_status(R.MESSAGE_DROPPED), str(exc), trailers
    if isinstance(exc, NotFound):
        return abort_args(R.NOT_FOUND, str(exc))
    if isinstance(exc, InvalidArgument):
        status, message, trailers = abort_args(R.INVALID_ARGUMENT, str(exc))
        return status, message, (*trailers, (FIELD, exc.field))
    if isinstance(exc, StorageFailed):
        return abort_args(R.STORAGE_FAILED, f"storage failed: {exc}")
    if isinstance(exc, DataCorrupted):
        return abort_args(R.DATA_CORRUPTED, str(exc))
    if isinstance(exc, StatePruned):
        return abort_args(R.STATE_PRUNED, str(exc))
    if isinstance(exc, (InvalidBlock, InvariantBroken)):
        return abort_args(R.INTERNAL, f"internal error: {exc}")
    if isinstance(exc, ChainError):
        return abort_args(R.INTERNAL, str(exc))
    return abort_args(R.INTERNAL, "internal error")
