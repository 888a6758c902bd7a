"""What ChainClient and AsyncChainClient share: channel options, the commit checks and result, stream start points."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from chain.v1 import block_pb2, rpc_pb2
from chain.v1 import message_pb2 as pb
from node.errors import CliCode
from node.sdk.errors import ChainError, DeadlineExceeded, OutcomeUnknown, rejection

# 64 MiB messages (a block with its chunks); a restarted node is found again within a second or two (gRPC's
# default reconnect backoff grows to two minutes, longer than a stream's reconnect budget).
CHANNEL_OPTIONS: Final[tuple[tuple[str, Any], ...]] = (
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
)
RECONNECT_SECONDS: Final = 60.0  # how long a broken stream is reopened for (node.sdk.streams)


def error_of(result: rpc_pb2.SubmitResult | rpc_pb2.DryRunMessageResponse) -> ChainError | None:
    """The rejection a batch result or a dry run reports (its Rejected subclass), None when it passed."""
    passed = result.accepted if isinstance(result, rpc_pb2.SubmitResult) else result.valid
    return None if passed else rejection(result.reason_code, result.detail)


def raise_rejected(results: Sequence[rpc_pb2.SubmitResult]) -> None:
    """Raise the first rejection of a batch (naming the message's index and how many were refused)."""
    bad = [r for r in results if not r.accepted]
    if not bad:
        return
    first = bad[0]
    more = f" ({len(bad) - 1} more refused)" if len(bad) > 1 else ""
    err = rejection(first.reason_code, f"message {first.index}: {first.detail}{more}")
    err.values.update(index=int(first.index), refused=[int(r.index) for r in bad])
    raise err


class Committed(list[block_pb2.CommittedMessage]):
    """What `commit()` returns: the committed messages in the order given, and `height`, the block the last of
    them is in (a read of a state at or past it sees them all)."""

    @property
    def height(self) -> int:
        return max((int(c.block_number) for c in self), default=0)


def unknown_hashes(err: OutcomeUnknown, msgs: Sequence[pb.Message]) -> list[bytes]:
    """The hashes of `msgs` to look up after `err` (a batch whose outcome the node could not tell), or raise
    `err` when it does not name them all (the node refused the others for good: their reasons are lost)."""
    hashes = [bytes(m.hash) for m in msgs]
    if not set(hashes) <= set(err.hashes):
        raise err
    return hashes


def not_committed(message_hash: bytes, timeout: float) -> DeadlineExceeded:
    """A message that was not in a block within `timeout` seconds (its outcome is not known yet)."""
    text = f"message {message_hash.hex()} not committed within {timeout} s"
    return DeadlineExceeded(CliCode.TIMEOUT, text, text=text)


def head_block(page: rpc_pb2.ListBlocksResponse) -> int:
    """The head block's number from ListBlocks(page_size=1) (newest first); 0 on an empty chain."""
    return int(page.blocks[0].header.number) if page.blocks else 0
