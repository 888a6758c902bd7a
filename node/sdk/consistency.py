"""Read consistency in the SDK (docs/sdk.md, "Read consistency"): what a read asks of the node, and the height
its answer reflects.

Every typed read takes `consistency="linearizable"` (the member first learns the ordered log's height, then
answers at or past it) and `min_height=N` (an answer from a state at or past block N, waited for up to the
call's timeout). A client with `session=True` (the default) also sends, with every read, the height of its
own last commit (`session_height`, moved on by `wait_committed`/`commit`): a write is visible to the reads
that follow it, whichever node answers them. The node names the height each answer reflects; the client
keeps the last one in `last_height`.

    metadata = read_metadata(ReadOptions(consistency="linearizable"), session_height=0)
    height = height_of(call.trailing_metadata())
"""

from __future__ import annotations

from typing import Any, TypedDict

from node.errors import CHAIN_HEIGHT, CHAIN_MIN_HEIGHT, CHAIN_READ_CONSISTENCY, trailer

Metadata = tuple[tuple[str, str], ...]


class ReadOptions(TypedDict, total=False):
    """A typed read's consistency keywords."""

    consistency: str  # "linearizable", or "serializable" (the node's default: its applied state)
    min_height: int  # an answer from a state at or past this block


def read_metadata(read: ReadOptions, session_height: int) -> Metadata:
    """The call metadata of a read asking `read`, at or past `session_height` too (0: no session height)."""
    out: Metadata = ()
    min_height = max(int(read.get("min_height", 0)), session_height)
    if min_height > 0:
        out += ((CHAIN_MIN_HEIGHT, str(min_height)),)
    consistency = read.get("consistency", "")
    if consistency:
        out += ((CHAIN_READ_CONSISTENCY, consistency),)
    return out


def height_of(trailers: Any) -> int:
    """The height a node named in its `chain-height` trailer (0 when it named none: an older node)."""
    value = trailer(trailers, CHAIN_HEIGHT)
    return int(value) if value is not None and value.isdigit() else 0
