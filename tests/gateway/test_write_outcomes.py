"""REST answers of the write outcomes: a dropped message's GetMessage is 404 with its reason and height, an
unknown outcome 504 with the hashes and no Retry-After (nothing tells a client to send it again)."""

from __future__ import annotations

import grpc

from gateway.errors import grpc_error, retry_after
from node.errors import MessageDropped, MessageRejected, Reason
from node.server.rpc.status import to_status


def as_node_error(exc: Exception) -> grpc.aio.AioRpcError:
    """The failure a node's interceptor makes of `exc`, as the gateway's client sees it."""
    status, message, trailers = to_status(exc)
    return grpc.aio.AioRpcError(status, grpc.aio.Metadata(), grpc.aio.Metadata(*trailers), message, None)


def test_a_dropped_message_is_404_with_the_reason_and_the_height() -> None:
    err = as_node_error(MessageDropped("cd" * 32, "NAME_TAKEN", "refused when forwarded again", 41))
    status, code, message, details = grpc_error(err)
    assert (status, code) == (404, "MESSAGE_DROPPED")
    assert details["reason"] == "NAME_TAKEN" and details["height"] == 41
    assert "dropped at block 41: NAME_TAKEN" in message


def test_an_unknown_outcome_is_504_with_the_hashes_and_no_retry_after() -> None:
    err = as_node_error(MessageRejected(Reason.OUTCOME_UNKNOWN, "no answer", hashes=["ab" * 32]))
    status, code, _message, details = grpc_error(err)
    assert (status, code) == (504, "OUTCOME_UNKNOWN")
    assert details["hashes"] == ["ab" * 32] and retry_after(err) == {}
