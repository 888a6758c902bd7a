"""The block log on etcd: its key schema, the fenced append, reads and compaction.

Keys (all under the cluster prefix, `/chain-node/` by default):

    leader              {"id", "addr"} of the leader, attached to its lease
    next                the number of the next block to append (decimal)
    genesis             the chain parameters every member must share (JSON)
    log/<N:020d>        block N: b"W" + its entry (the block and its write set), b"B" + the encoded Block
                        (an entry without a write set), or b"P" + a JSON manifest of parts
    part/<N:020d>/<hash>/<i:06d>   part i of a block too large for one etcd request
    member/<id>         a member's applied height (attached to its lease)
    snapshot/<id>       {block_number, name, addr} of the newest snapshot a member serves (on its lease)

Block N lands with one transaction that compares `next == N` and the lease of
`leader` with the writer's lease, so a deposed leader (whose lease expired or
was replaced) can never append, and two different blocks can never hold one
number. A block bigger than `part_bytes` is written first as parts (each put
is fenced the same way), then the manifest lands with the fenced commit;
parts of a block that never committed are removed by compaction.

An entry (b"W") is the block's encoding's length (4 bytes, big-endian), the block, then the write set the
leader's execution made (node/state/writeset.py), which members applying by write set take instead of
executing the block again. A manifest of such an entry says `"entry": "W"`; one without holds a bare block.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from chain.v1 import block_pb2
from node.errors import InvariantBroken
from node.server.ordering.etcd.client import (
    Compare,
    EtcdClient,
    cmp_absent,
    cmp_lease,
    cmp_value,
    op_delete,
    op_put,
    op_range,
    prefix_end,
)

INLINE = b"B"
ENTRY = b"W"
MANIFEST = b"P"
BLOCK_LENGTH = 4  # bytes of the block's length at the head of an entry
# etcd refuses requests over --max-request-bytes (1.5 MiB by default); keep each well under it.
DEFAULT_PART_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Keys:
    prefix: bytes

    @property
    def leader(self) -> bytes:
        return self.prefix + b"leader"

    @property
    def next(self) -> bytes:
        return self.prefix + b"next"

    @property
    def genesis(self) -> bytes:
        return self.prefix + b"genesis"

    def log(self, number: int) -> bytes:
        return self.prefix + b"log/%020d" % number

    @property
    def log_prefix(self) -> bytes:
        return self.prefix + b"log/"

    def part(self, number: int, digest: str, index: int) -> bytes:
        return self.prefix + b"part/%020d/%s/%06d" % (number, digest.encode(), index)

    def parts_of(self, number: int, digest: str) -> bytes:
        return self.prefix + b"part/%020d/%s/" % (number, digest.encode())

    def part_floor(self, number: int) -> bytes:
        return self.prefix + b"part/%020d" % number

    def member(self, node_id: str) -> bytes:
        return self.prefix + b"member/" + node_id.encode()

    @property
    def member_prefix(self) -> bytes:
        return self.prefix + b"member/"

    def snapshot(self, node_id: str) -> bytes:
        return self.prefix + b"snapshot/" + node_id.encode()

    @property
    def snapshot_prefix(self) -> bytes:
        return self.prefix + b"snapshot/"


def number_of(key: bytes) -> int:
    return int(key.rsplit(b"/", 1)[1])


@dataclass(frozen=True)
class LogEntry:
    """What one log entry holds: the block and, when the leader wrote one, its write set."""

    block: block_pb2.Block
    write_set: bytes | None


def entry_bytes(block: block_pb2.Block, write_set: bytes | None) -> bytes:
    """A log value's body: b"B" + the block alone, or b"W" + the entry of the block and its write set."""
    data = block.SerializeToString()
    if write_set is None:
        return INLINE + data
    return ENTRY + len(data).to_bytes(BLOCK_LENGTH, "big") + data + write_set


@dataclass(frozen=True)
class Tail:
    """One poll of the log: the next number to append and the entries read after the applied height."""

    next_number: int
    entries: list[tuple[int, bytes]]  # (number, raw log value)
    first: int  # the oldest number still in the log (0 when the log is empty)


class BlockLog:
    def __init__(self, client: EtcdClient, keys: Keys, *, part_bytes: int = DEFAULT_PART_BYTES) -> None:
        self.client = client
        self.keys = keys
        self.part_bytes = part_bytes

    # ---- appending (leader only; fenced) ----
    def _fence(self, number: int, lease: int) -> list[Compare]:
        return [cmp_value(self.keys.next, str(number).encode()), cmp_lease(self.keys.leader, lease)]

    async def seed(self, next_number: int) -> None:
        """Create `next` if the log has never been written (the first leader seeds it at its height + 1)."""
        await self.client.txn([cmp_absent(self.keys.next)], [op_put(self.keys.next, str(next_number).encode())])

    async def append(self, block: block_pb2.Block, lease: int, write_set: bytes | None = None) -> bool:
        """Append block N (with the write set of its execution, when given); False when N is not the next
        number or `lease` no longer holds leadership."""
        number = int(block.header.number)
        body = entry_bytes(block, write_set)
        if len(body) - 1 <= self.part_bytes:
            value = body
        else:
            data = body[1:]
            digest = hashlib.sha256(data).hexdigest()
            parts = [data[i : i + self.part_bytes] for i in range(0, len(data), self.part_bytes)]
            for i, part in enumerate(parts):
                put = op_put(self.keys.part(number, digest, i), part)
                if not (await self.client.txn(self._fence(number, lease), [put])).succeeded:
                    return False
            manifest: dict[str, object] = {"parts": len(parts), "size": len(data), "sha256": digest}
            if body[:1] == ENTRY:
                manifest["entry"] = ENTRY.decode()
            value = MANIFEST + json.dumps(manifest, sort_keys=True).encode()
        ops = [op_put(self.keys.log(number), value), op_put(self.keys.next, str(number + 1).encode())]
        return (await self.client.txn(self._fence(number, lease), ops)).succeeded

    # ---- reading ----
    async def tail(self, after: int, limit: int) -> Tail:
        """`next`, the oldest entry's number, and up to `limit` entries after block `after`, in one read (the
        oldest entry's key only: after compaction it is a whole block, and every member polls)."""
        result = await self.client.txn(
            [],
            [
                op_range(self.keys.next),
                op_range(self.keys.log(after + 1), prefix_end(self.keys.log_prefix), limit),
                op_range(self.keys.log_prefix, prefix_end(self.keys.log_prefix), 1, keys_only=True),
            ],
        )
        nxt = result.ranges(0)
        entries = [(number_of(kv.key), kv.value) for kv in result.ranges(1)]
        oldest = result.ranges(2)
        return Tail(int(nxt[0].value) if nxt else 0, entries, number_of(oldest[0].key) if oldest else 0)

    async def decode(self, number: int, value: bytes) -> block_pb2.Block:
        """The block a log value holds (reading its parts when it was split)."""
        return (await self.entry(number, value)).block

    async def entry(self, number: int, value: bytes) -> LogEntry:
        """The block a log value holds and its write set (None when the entry has none)."""
        kind = value[:1]
        data = value[1:]
        if kind == MANIFEST:
            manifest = json.loads(data)
            digest = str(manifest["sha256"])
            prefix = self.keys.parts_of(number, digest)
            kvs = await self.client.range(prefix, prefix_end(prefix))
            data = b"".join(kv.value for kv in sorted(kvs, key=lambda kv: kv.key))
            if len(kvs) != manifest["parts"] or hashlib.sha256(data).hexdigest() != digest:
                raise InvariantBroken(f"log entry {number}: parts do not match the manifest")
            kind = str(manifest.get("entry", INLINE.decode())).encode()
        write_set = None
        if kind == ENTRY:
            size = int.from_bytes(data[:BLOCK_LENGTH], "big")
            if len(data) < BLOCK_LENGTH + size:
                raise InvariantBroken(f"log entry {number}: its block runs past the entry")
            data, write_set = data[BLOCK_LENGTH : BLOCK_LENGTH + size], data[BLOCK_LENGTH + size :]
        elif kind != INLINE:
            raise InvariantBroken(f"log entry {number}: unknown encoding {value[:1]!r}")
        block = block_pb2.Block.FromString(data)
        if block.header.number != number:
            raise InvariantBroken(f"log entry {number} holds block {block.header.number}")
        return LogEntry(block, write_set)

    # ---- compaction ----
    async def compact_below(self, floor: int) -> int:
        """Delete log entries and parts numbered below `floor`; compact etcd's history. Returns the revision."""
        deleted = await self.client.txn(
            [],
            [
                op_delete(self.keys.log_prefix, self.keys.log(floor)),
                op_delete(self.keys.part_floor(0), self.keys.part_floor(floor)),
            ],
        )
        return deleted.revision
