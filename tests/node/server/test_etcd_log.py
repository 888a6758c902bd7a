"""The etcd client and the fenced block log against a real one-member etcd."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from chain.v1 import block_pb2
from node.errors import InvariantBroken
from node.server.ordering.etcd.client import EtcdClient, EtcdUnavailable, cmp_absent, op_put, prefix_end
from node.server.ordering.etcd.log import ENTRY, INLINE, MANIFEST, BlockLog, Keys, LogEntry
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.procs import free_port

KEYS = Keys(b"/test/")


@pytest.fixture
async def client(etcd1: EtcdCluster) -> AsyncIterator[EtcdClient]:
    c = EtcdClient(etcd1.endpoints)
    yield c
    await c.close()


def block(number: int, filler: int = 0) -> block_pb2.Block:
    b = block_pb2.Block()
    b.header.number = number
    b.hash = bytes([number % 256]) * 32
    b.header.parent_hash = b"\x07" * filler  # only the size matters to the log
    return b


async def lead(client: EtcdClient) -> int:
    lease = await client.grant(5)
    await client.txn([], [op_put(KEYS.leader, b"{}", lease)])
    return lease


async def test_append_is_fenced_by_number_and_lease(client: EtcdClient) -> None:
    log = BlockLog(client, KEYS)
    await log.seed(1)
    await log.seed(7)  # seeding never moves a log that exists
    lease = await lead(client)
    assert await log.append(block(1), lease)
    assert not await log.append(block(1, filler=3), lease)  # 1 is taken: never two blocks with one number
    assert not await log.append(block(3), lease)  # not the next number
    other = await client.grant(5)
    assert not await log.append(block(2), other)  # not the leader's lease
    deposed, lease = lease, await lead(client)  # leadership moves to a new lease
    assert not await log.append(block(2), deposed)
    assert await log.append(block(2), lease)
    tail = await log.tail(0, 10)
    assert tail.next_number == 3 and tail.first == 1
    assert [n for n, _ in tail.entries] == [1, 2]
    assert [await log.decode(n, v) for n, v in tail.entries] == [block(1), block(2)]
    assert (await log.tail(1, 10)).entries[0][0] == 2


async def test_large_blocks_are_split_and_reassembled(client: EtcdClient) -> None:
    log = BlockLog(client, KEYS, part_bytes=1000)
    await log.seed(1)
    lease = await lead(client)
    big = block(1, filler=3500)
    assert await log.append(big, lease)
    (number, value), *_ = (await log.tail(0, 10)).entries
    assert value.startswith(MANIFEST)
    parts = await client.range(KEYS.part_floor(1), prefix_end(KEYS.part_floor(1)))
    assert len(parts) == 4 and all(len(p.value) <= 1000 for p in parts)
    assert await log.decode(number, value) == big
    await client.put(parts[1].key, b"corrupt")
    with pytest.raises(InvariantBroken):
        await log.decode(number, value)


async def test_an_entry_carries_the_write_set_inline_or_split(client: EtcdClient) -> None:
    log = BlockLog(client, KEYS, part_bytes=1000)
    await log.seed(1)
    lease = await lead(client)
    small, large = b"\x01" + bytes(range(40)), bytes(range(256)) * 12  # what a write set holds is the state's
    assert await log.append(block(1), lease, small)
    assert await log.append(block(2, filler=600), lease, large)  # the block fits one part, the entry does not
    assert await log.append(block(3), lease)  # an entry without a write set, as an older leader wrote it
    values = dict((await log.tail(0, 10)).entries)
    assert values[1].startswith(ENTRY) and values[2].startswith(MANIFEST) and values[3].startswith(INLINE)
    assert await log.entry(1, values[1]) == LogEntry(block(1), small)
    assert await log.entry(2, values[2]) == LogEntry(block(2, filler=600), large)
    assert await log.entry(3, values[3]) == LogEntry(block(3), None)
    assert await log.decode(2, values[2]) == block(2, filler=600)
    with pytest.raises(InvariantBroken):  # a block length past the entry's end
        await log.entry(1, values[1][:1] + (10**6).to_bytes(4, "big") + values[1][5:])


async def test_compaction_removes_entries_and_parts_below_the_floor(client: EtcdClient) -> None:
    log = BlockLog(client, KEYS, part_bytes=1000)
    await log.seed(1)
    lease = await lead(client)
    for n in range(1, 5):
        assert await log.append(block(n, filler=1500), lease)
    revision = await log.compact_below(3)
    await client.compact(revision)
    tail = await log.tail(0, 10)
    assert tail.first == 3 and [n for n, _ in tail.entries] == [3, 4]
    parts = await client.range(KEYS.prefix + b"part/", prefix_end(KEYS.prefix + b"part/"))
    assert {int(kv.key.split(b"/")[3]) for kv in parts} == {3, 4}


async def test_client_fails_over_and_reports_unavailable(etcd1: EtcdCluster) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    c = EtcdClient([dead, *etcd1.endpoints], timeout=1)
    try:
        result = await c.txn([cmp_absent(b"/k")], [op_put(b"/k", b"v")])
        assert result.succeeded
        assert (await c.get(b"/k")) is not None
        assert await c.keepalive(await c.grant(5)) > 0
    finally:
        await c.close()
    c = EtcdClient([dead], timeout=1)
    try:
        with pytest.raises(EtcdUnavailable):
            await c.get(b"/k")
    finally:
        await c.close()
