"""Reason -> gRPC status: one total table, and `to_status` puts the code in the `reason-code` trailer."""

from __future__ import annotations

import grpc
import pytest

from node.errors import (
    FIELD,
    REASON_CODE,
    REASON_VALUES,
    RETRY_AFTER_MS,
    InvalidArgument,
    InvariantBroken,
    MessageRejected,
    NotFound,
    Reason,
    trailer,
)
from node.server.rpc.status import REASON_STATUS, reason_status, to_status


def test_every_reason_has_a_grpc_status() -> None:
    assert set(REASON_STATUS) == set(Reason)


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        (Reason.HASH_MISMATCH, grpc.StatusCode.INVALID_ARGUMENT),
        (Reason.MESSAGE_TOO_LARGE, grpc.StatusCode.RESOURCE_EXHAUSTED),
        (Reason.NAME_TAKEN, grpc.StatusCode.ALREADY_EXISTS),
        (Reason.CUSTODY_KEY_REVOKED, grpc.StatusCode.PERMISSION_DENIED),
        (Reason.NONCE_MISMATCH, grpc.StatusCode.FAILED_PRECONDITION),
        (Reason.NOT_LEADER, grpc.StatusCode.UNAVAILABLE),
        (Reason.STATE_DIVERGED, grpc.StatusCode.UNAVAILABLE),
        (Reason.SLOW_SUBSCRIBER, grpc.StatusCode.RESOURCE_EXHAUSTED),
        (Reason.NOT_FOUND, grpc.StatusCode.NOT_FOUND),
        (Reason.INTERNAL, grpc.StatusCode.INTERNAL),
    ],
)
def test_status_of_a_reason(reason: Reason, status: grpc.StatusCode) -> None:
    assert reason_status(reason) == status


def test_rejection_trailers() -> None:
    status, message, trailers = to_status(MessageRejected(Reason.NOT_LEADER, "no leader", retry_after_ms=250))
    assert status == grpc.StatusCode.UNAVAILABLE and message == "NOT_LEADER: no leader"
    assert trailer(trailers, REASON_CODE) == "NOT_LEADER"
    assert trailer(trailers, REASON_VALUES) == '{"retry_after_ms": 250}'
    assert trailer(trailers, RETRY_AFTER_MS) == "250"


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (NotFound("block", "7"), grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
        (InvalidArgument("page_token", "bad"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
        (InvariantBroken("bug"), grpc.StatusCode.INTERNAL, "INTERNAL"),
        (RuntimeError("secret"), grpc.StatusCode.INTERNAL, "INTERNAL"),
    ],
)
def test_other_errors_name_their_reason(exc: BaseException, status: grpc.StatusCode, code: str) -> None:
    got_status, message, trailers = to_status(exc)
    assert (got_status, trailer(trailers, REASON_CODE)) == (status, code)
    assert "secret" not in message
    assert trailer(trailers, FIELD) == ("page_token" if isinstance(exc, InvalidArgument) else None)


def test_trailer_reads_str_and_bytes_and_misses() -> None:
    metadata = (("other", "x"), (REASON_CODE, b"STREAM_GAP"))
    assert trailer(metadata, REASON_CODE) == "STREAM_GAP"
    assert trailer(metadata, FIELD) is None
    assert trailer(None, REASON_CODE) is None
