"""A block applied by its leader's write set (node/state/writeset.py, `Chain.apply_writes`) leaves the store
byte for byte as executing the block does; a tampered or malformed write set is refused with InvalidBlock and
nothing is committed. Real LMDB chains: one that builds (the leader), one that executes each block again
(`full`) and one that applies the write sets (`root`, through a writer process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import lmdb
import pytest

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.errors import InvalidBlock
from node.merkle.codec import encode_leaf, key_path, node_hash, value_hash
from node.state.transition import BlockOutput
from node.state.writeset import VERSION, decode_write_set, encode_write_set
from node.storage import chainlog, schema
from tests.harness import Harness

Writes = dict[bytes, bytes | None]


def copied(chain: Chain, dest: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """`contents` of an open chain's store (one process cannot open an environment twice: a copy)."""
    chain.store.copy_to(dest)
    return contents(dest)


def contents(path: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """Every record of every database of the store at `path`."""
    env = lmdb.open(str(path), max_dbs=4, readonly=True, lock=False)
    try:
        out = {}
        for name in (b"state", b"nodes"):
            db = env.open_db(name, create=False)
            with env.begin(db=db) as txn:
                out[name] = list(txn.cursor())
        return out
    finally:
        env.close()


def history(h: Harness) -> list[BlockOutput]:
    """Blocks of every kind of write: accounts, projects and their names, collaborators, follows and their
    removal (deletes), a removed project, rejections of their time (stale, future) and repeats, empty blocks."""
    outs: list[BlockOutput] = []
    alice, bob = h.actor(units=10), h.actor(units=10)
    made = h.build(alice.b.project_create("one"), alice.b.project_create("two"), bob.b.project_create("three"))
    outs.append(made)
    ids = [bytes(r.message.hash) for r in made.applied]
    project = ids[0]
    for n in range(6):
        msgs = [alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {n}.{i}") for i in range(5)]
        msgs.append(alice.b.follow(bob.address))
        msgs.append(bob.b.follow(alice.address, remove=n % 2 == 1))
        msgs.append(alice.b.star(project, remove=n % 3 == 2))
        msgs.append(bob.b.account_data(pb.ACCOUNT_FIELD_BIO, "late", timestamp=h.now + 3600))  # future: dropped
        msgs.append(alice.b.project_create(f"p{n}", timestamp=h.now - 10 * 86400))  # stale: dropped
        msgs.append(msgs[0])  # repeated: dropped
        out = h.build(*msgs)
        assert out.dropped, "the block drops what it must"
        outs.append(out)
    outs.append(
        h.build(alice.b.collaborator_add(project, bob.address, pb.PERMISSION_WRITE), alice.b.project_remove(ids[1]))
    )
    outs.append(h.build())
    return outs


Built = tuple[Harness, list[BlockOutput]]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """The leader's chain, built once for the module, and the outputs of the blocks `history` made."""
    h = Harness(tmp_path_factory.mktemp("leader") / "chain")
    yield h, history(h)
    h.chain.close()


def replay(
    chain: Chain, leader: Chain, outs: list[BlockOutput], apply: Callable[[Chain, BlockOutput], None], upto: int = 0
) -> None:
    """The leader's blocks `chain` lacks (up to `upto`, 0: all), those of `outs` by `apply`, others executed."""
    by_number = {int(o.block.header.number): o for o in outs}
    for number in range(chain.height + 1, (upto or leader.height) + 1):
        out = by_number.get(number)
        if out is None:
            chain.commit(chain.apply(stored(leader, number), verify=False))
        else:
            apply(chain, out)


def stored(chain: Chain, number: int) -> block_pb2.Block:
    with chain.read() as (view, _):
        block = chainlog.read_block(view, number)
    assert block is not None
    return block


def by_writes(chain: Chain, out: BlockOutput) -> None:
    chain.commit(chain.apply_writes(out.block, encode_write_set(out.writes)))


def by_execution(chain: Chain, out: BlockOutput) -> None:
    chain.commit(chain.apply(out.block, verify=False))


def test_applying_write_sets_stores_what_executing_does(tmp_path: Path, built: Built) -> None:
    h, outs = built
    full = Chain.open(tmp_path / "full", h.chain.params)
    root = Chain.open(tmp_path / "root", h.chain.params)
    root.start_writer()  # the tree update runs where a member's runs: in the store's writer process
    try:
        replay(full, h.chain, outs, by_execution)
        replay(root, h.chain, outs, by_writes)
        assert root.height == full.height == h.chain.height
        assert bytes(root.head().hash) == bytes(h.chain.head().hash)
    finally:
        full.close()
        root.close()
    leader = copied(h.chain, tmp_path / "leader")
    assert contents(tmp_path / "full") == leader
    assert contents(tmp_path / "root") == leader


def test_encoding_round_trips_and_carries_only_the_handlers_writes(
    built: Built,
) -> None:
    _, outs = built
    for out in outs:
        data = encode_write_set(out.writes)
        assert data == encode_write_set(dict(reversed(list(out.writes.items()))))  # order of the writes: none
        writes = decode_write_set(int(out.block.header.number), data)
        assert list(writes) == sorted(writes)
        tree = schema.tree_writes(out.writes)
        assert all(writes[k] == v for k, v in tree.items())  # every change of public state
        assert not any(k[0] >= schema.Prefix.BLOCK for k in writes)  # never a record the block gives
        assert any(v is None for out in outs for v in decode_write_set(0, encode_write_set(out.writes)).values())


def tampered_case(case: str, writes: Writes) -> Writes:
    """`writes` with one thing changed, as a broken or malicious log entry would carry it."""
    tree = sorted(k for k, v in writes.items() if schema.in_tree(k) and v is not None)
    changed = dict(writes)
    if case == "changed value":
        changed[tree[0]] = (writes[tree[0]] or b"") + b"!"
    elif case == "dropped key":
        del changed[tree[-1]]
    elif case == "reordered entry":  # two entries' values swapped: each key now holds the other's
        changed[tree[0]], changed[tree[1]] = writes[tree[1]], writes[tree[0]]
    elif case == "added key":
        changed[bytes([schema.Prefix.ACCOUNT]) + b"\x00" * 20] = b"forged"
    return changed


CASES = ["changed value", "dropped key", "reordered entry", "added key"]


@pytest.mark.parametrize("case", CASES)
def test_a_tampered_write_set_is_refused_by_the_root_check(tmp_path: Path, built: Built, case: str) -> None:
    h, outs = built
    chain = Chain.open(tmp_path / "chain", h.chain.params)
    try:
        target = outs[3]  # a block with deletes, updates and new keys
        number = int(target.block.header.number)
        replay(chain, h.chain, outs, by_writes, upto=number - 1)
        assert chain.height == number - 1
        before = copied(chain, tmp_path / "before")
        forged = encode_write_set(tampered_case(case, dict(target.writes)))
        with pytest.raises(InvalidBlock) as refused:
            chain.apply_writes(target.block, forged)
        assert refused.value.field == "state_root"
        assert chain.height == number - 1
        assert copied(chain, tmp_path / "after") == before  # nothing of it was written
        chain.commit(chain.apply_writes(target.block, encode_write_set(target.writes)))  # the true one applies
        assert bytes(chain.head().hash) == bytes(target.block.hash)
    finally:
        chain.close()


def test_a_key_dropped_on_its_way_back_to_an_earlier_value_is_refused(tmp_path: Path, built: Built) -> None:
    """A write set without a key that returns to a value it held before (a follow removed, then made again).
    The tree leaf of that value is already stored, under the block that first made it: a check that took tree
    nodes from the wire and accepted any node already stored would let the new root reach it while the
    member's state kept the key's other value. The member computes the tree from the changed keys itself,
    from its own previous root, so the root differs and the block is refused."""
    h, outs = built
    target = outs[3]
    earlier = {(k, v) for out in outs[:3] for k, v in schema.tree_writes(out.writes).items() if v is not None}
    returning = [k for k, v in schema.tree_writes(target.writes).items() if (k, v) in earlier]
    assert returning, "the history has a key going back to an earlier value in this block"
    chain = Chain.open(tmp_path / "chain", h.chain.params)
    try:
        number = int(target.block.header.number)
        replay(chain, h.chain, outs, by_writes, upto=number - 1)
        value = target.writes[returning[0]]
        assert value is not None
        leaf = node_hash(encode_leaf(key_path(returning[0]), value_hash(value)))
        assert leaf in {name for name, _ in chain.store.tree_nodes()}  # the leaf it goes back to is stored
        forged = {k: v for k, v in target.writes.items() if k != returning[0]}
        with pytest.raises(InvalidBlock) as refused:
            chain.apply_writes(target.block, encode_write_set(forged))
        assert refused.value.field == "state_root"
        assert chain.height == number - 1
    finally:
        chain.close()


def raw(entries: list[tuple[bytes, bytes | None]]) -> bytes:
    """Entries encoded as given, each key whole (no prefix shared), without the encoder's order and checks."""
    out = bytearray([VERSION, len(entries)])
    for key, value in entries:
        assert len(key) < 128 and (value is None or len(value) < 127)
        out += bytes([0, len(key)]) + key
        out += b"\x00" if value is None else bytes([len(value) + 1]) + value
    return bytes(out)


def swap_entries(data: bytes) -> bytes:
    """The same entries with the first two in the other order."""
    entries = list(decode_write_set(0, data).items())
    return raw([entries[1], entries[0], *entries[2:]])


@pytest.mark.parametrize(
    ("what", "forge"),
    [
        ("entries out of order", swap_entries),
        ("another version", lambda data: bytes([VERSION + 1]) + data[1:]),
        ("trailing bytes", lambda data: data + b"\x00"),
        ("cut short", lambda data: data[:-3]),
        ("a repeated key", lambda data: raw([*decode_write_set(0, data).items()][:1] * 2)),
        ("a block record", lambda data: raw([(schema.block_key(1), b"forged")])),
        ("an activity record", lambda data: raw([(schema.account_activity_key(b"\x01" * 20, 1), b"forged")])),
    ],
)
def test_a_malformed_write_set_is_refused(built: Built, what: str, forge: Callable[[bytes], bytes]) -> None:
    _, outs = built
    small = [(k, v) for k, v in sorted(outs[-2].writes.items()) if schema.in_tree(k)][:4]
    data = raw(small)
    assert decode_write_set(7, data) == dict(small)
    with pytest.raises(InvalidBlock) as refused:
        decode_write_set(7, forge(data))
    assert refused.value.field == "write set", what
    assert refused.value.number == 7
