"""JSON bodies remembered by the node answer they were made from: a read's REST body is a pure function of
the response bytes the node sent, so the same bytes need not be decoded, shaped and serialised again.

    GET_ACCOUNT_BODY = Shaped(reads.GET_ACCOUNT, shapes.account_summary)   # at import: the read, its shape
    return await c.answer(GET_ACCOUNT_BODY, request)                       # in the route's handler (Call)
    GET_BLOCK_BODY = record_of(reads.GET_BLOCK, "block")    # also whole(read), page_of(read, "blocks")

The node is asked every time; only what the gateway does with the answer is skipped. A key is the `Shaped`
(compared by identity: one per route, made at import) and the answer's bytes, so a changed record (a new
block) is new bytes and a new body, and nothing stale can be served: there is nothing to invalidate. On an
idle chain the GETs of one account return the same bytes and hit; under writes only the changed records
miss. Decoding, shaping and serialising a GetAccount answer costs ~5.8 µs of the gateway's ~100 µs of
CPU per REST GET; a hit costs a dict lookup, which hashes the answer's bytes.

Bounded by bytes (`--rest-memo-bytes`, default 8 MiB per serving process; 0 turns it off): the answer and
the body of each entry are counted, and node/memo.py's rules keep the bound (an entry over a sixty-fourth
is not kept, so large list pages cannot push everything else out; the oldest go first). Per process, owned
by the app (`app[BODIES]`), not shared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson
from google.protobuf.message import Message

from gateway.rest.shapes import Json, to_json, to_json_list
from gateway.upstream import Read
from node.memo import ENTRY_OVERHEAD, BoundedMemo

M = TypeVar("M", bound=Message)


@dataclass(frozen=True, eq=False)  # eq=False: hashed and compared by identity (one per route, at import)
class Shaped(Generic[M]):
    """A read and the pure function that makes its REST body's JSON value from the response."""

    read: Read[M]
    shape: Callable[[M], Json]
    empty: bytes | None = None  # the body of an empty page (`page_of`), None for other shapes

    def body(self, raw: bytes) -> bytes:
        """The REST body of the answer `raw`, made from scratch."""
        return orjson.dumps(self.shape(self.read.response.FromString(raw)))


class BodyMemo(BoundedMemo[tuple[Shaped[Any], bytes], bytes]):
    """REST bodies kept under (route's Shaped, answer bytes); an entry costs its answer, its body and
    ENTRY_OVERHEAD (node/memo.py)."""

    def body(self, shaped: Shaped[M], raw: bytes) -> bytes:
        """The REST body of the answer `raw` to `shaped`'s read: remembered, or made and remembered."""
        key = (shaped, raw)
        found = self.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        made = shaped.body(raw)
        self.put(key, made, len(raw) + len(made) + ENTRY_OVERHEAD)
        return made


def record_of(read: Read[M], field: str) -> Shaped[M]:
    """A read whose REST body is one record of its response (`GetBlock`: the `block`)."""
    return Shaped(read, lambda resp: to_json(getattr(resp, field)))


def whole(read: Read[M]) -> Shaped[M]:
    """A read whose REST body is its whole response (a proof)."""
    return Shaped(read, to_json)


def page_of(read: Read[M], field: str) -> Shaped[M]:
    """A list read whose REST body is a page: the records of `field` and the cursor of the next page."""

    def page(resp: Any) -> Json:  # any list response: its records' field and `next_page_token`
        return {field: to_json_list(getattr(resp, field)), "next_cursor": resp.next_page_token}

    return Shaped(read, page, orjson.dumps({field: [], "next_cursor": ""}))
