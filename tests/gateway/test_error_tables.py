"""Reason -> category -> (gRPC, HTTP) status: one total table (node/reasons.py) both transports read, and the
HTTP status of every reason agrees with the node's gRPC status of it."""

from __future__ import annotations

import grpc
import pytest

from gateway.errors import GRPC_HTTP_STATUS, HTTP_CODES, REASON_HTTP_STATUS, grpc_error, http_status
from node.errors import Reason
from node.reasons import CATEGORY, Category, _by_reason
from node.server.rpc.status import REASON_STATUS

# The request's size, not load: 413 where the gRPC status alone would say 429.
SIZE = {Reason.MESSAGE_TOO_LARGE, Reason.BATCH_TOO_LARGE, Reason.PAYLOAD_TOO_LARGE}
# Answers only the gateway gives (HTTP routing and negotiation): their gRPC status has no HTTP status of its own.
HTTP_ONLY = {Reason.METHOD_NOT_ALLOWED, Reason.NOT_ACCEPTABLE, Reason.UNSUPPORTED_MEDIA_TYPE, Reason.UNIMPLEMENTED}


def test_every_reason_has_an_http_status() -> None:
    assert set(REASON_HTTP_STATUS) == set(Reason)


def test_both_transports_read_the_one_table() -> None:
    assert set(CATEGORY) == set(Reason)
    for reason, category in CATEGORY.items():
        assert REASON_STATUS[reason].name == category.value.grpc, reason
        assert REASON_HTTP_STATUS[reason] == category.value.http, reason


def test_a_reason_in_two_categories_is_refused() -> None:
    with pytest.raises(AssertionError, match="two categories"):
        _by_reason({Category.INVALID: (Reason.NOT_FOUND,), Category.NOT_FOUND: (Reason.NOT_FOUND,)})


@pytest.mark.parametrize("reason", sorted(set(Reason) - SIZE - HTTP_ONLY - {Reason.BAD_GATEWAY}))
def test_http_status_is_the_grpc_status_s(reason: Reason) -> None:
    assert REASON_HTTP_STATUS[reason] == GRPC_HTTP_STATUS.get(REASON_STATUS[reason], 500)


def test_size_reasons_are_413() -> None:
    assert {r for r, s in REASON_HTTP_STATUS.items() if s == 413} == SIZE


def test_http_codes_agree_with_the_table() -> None:
    assert all(REASON_HTTP_STATUS[code] == status for status, code in HTTP_CODES.items())


def test_unknown_or_missing_reason_falls_back_to_the_grpc_status() -> None:
    assert http_status("SOMETHING_NEWER", grpc.StatusCode.FAILED_PRECONDITION) == 409
    assert http_status(None, grpc.StatusCode.UNIMPLEMENTED) == 500
    assert http_status("MEMPOOL_FULL", grpc.StatusCode.RESOURCE_EXHAUSTED) == 429


def test_field_trailer_becomes_a_detail() -> None:
    trailers = grpc.aio.Metadata(("reason-code", "INVALID_ARGUMENT"), ("field", "page_token"))
    err = grpc.aio.AioRpcError(grpc.StatusCode.INVALID_ARGUMENT, grpc.aio.Metadata(), trailers, "bad token", None)
    assert grpc_error(err) == (
        400,
        "INVALID_ARGUMENT",
        "bad token",
        {"field": "page_token", "grpc_status": "INVALID_ARGUMENT"},
    )
