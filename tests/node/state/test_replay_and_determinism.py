"""Replay protection, deterministic application and order-independent convergence of conflict rules."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chain.v1 import message_pb2 as pb
from node import constants as C
from node.block import header_hash
from node.chain import Chain
from node.errors import InvalidBlock, Reason
from node.merkle import InProcessUpdater
from node.sdk.keys import Ed25519Key, Secp256k1Key
from node.state.registry import REGISTRY
from node.state.transition import apply_block
from tests.harness import Harness, commit_meta
from tests.node.state.helpers import created_id, follower, p256_key, root_of, stored_block, tree_state, webauthn_key

MAIN = b"refs/heads/main"


# ---------------------------------------------------------------- one of every message type
def every_type_scenario(h: Harness) -> list[pb.Message]:
    """Commit one accepted message of every type (each in its own block); returns them."""
    a, b = h.actor(units=2), h.actor()
    sent: list[pb.Message] = []

    def commit(msg: pb.Message) -> bytes:
        h.commit(msg)
        sent.append(msg)
        return bytes(msg.hash)

    pid = commit(a.b.project_create("every"))
    spare = commit(a.b.project_create("spare"))
    c1 = commit_meta(1)
    c2 = commit_meta(2, c1.hash)
    commit(a.b.commit_bundle(pid, [c1, c2]))
    commit(a.b.ref_update(pid, MAIN, c1.hash, 1))
    commit(a.b.ref_delete(pid, MAIN, 2))
    commit(a.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, "described"))
    fork = commit(b.b.fork(pid, "fork"))
    commit(a.b.collaborator_add(pid, b.address, pb.PERMISSION_WRITE))
    commit(a.b.collaborator_remove(pid, b.address))
    mr = commit(b.b.merge_request_add(pid, fork, MAIN, MAIN, title="mr"))
    commit(b.b.merge_request_remove(pid, mr))
    commit(a.b.account_data(pb.ACCOUNT_FIELD_BIO, "bio"))
    extra = Ed25519Key.generate()
    commit(a.b.signer_add(a.wallet, a.next_nonce(), key=extra, scope=pb.KEY_SCOPE_SIGNING))
    commit(a.b.signer_remove(a.wallet, a.next_nonce(), extra.public_key))
    custody = p256_key()
    commit(a.b.keychain_authorize(a.wallet, a.next_nonce(), custody))
    commit(a.b.keychain_revoke(a.wallet, a.next_nonce(), custody.address))
    ext = Secp256k1Key.generate()
    commit(a.b.verification_add(ext))
    commit(a.b.verification_remove(ext.address))
    commit(h.authority.b.storage_grant(a.address, 1))
    commit(a.b.follow(b.address))
    commit(a.b.follow(b.address, remove=True))
    commit(b.b.like(pid, c1.hash))
    commit(b.b.like(pid, c1.hash, remove=True))
    commit(a.b.project_archive(spare))
    commit(a.b.project_remove(spare))
    commit(b.b.star(pid))  # a second LINK_ADD: star
    commit(b.b.star(pid, remove=True))
    assert {int(m.data.type) for m in sent} == set(REGISTRY.kinds)
    return sent


def test_replaying_any_accepted_message_is_a_duplicate(tmp_path: Path) -> None:
    h = Harness(tmp_path / "chain")
    sent = every_type_scenario(h)
    # all at once, in one later block
    root = h.root()
    out = h.build(*sent)
    assert not out.applied
    assert [(d.hash, d.error.reason) for d in out.dropped] == [(m.hash, Reason.DUPLICATE_MESSAGE) for m in sent]
    assert h.root() == root
    # and one by one
    for msg in sent:
        h.reject(msg, Reason.DUPLICATE_MESSAGE)


def test_replay_long_after_is_still_rejected(tmp_path: Path) -> None:
    h = Harness(tmp_path / "chain")
    a = h.actor()
    data_msg = a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x")
    create = a.b.project_create("p")
    h.commit(data_msg, create)
    h.now += C.MAX_QUOTA_MESSAGE_AGE + 10
    h.reject(data_msg, Reason.DUPLICATE_MESSAGE)
    # a quota-affecting message that old fails the time check first; either way it is not applied again
    h.reject(create, Reason.STALE_TIMESTAMP)


# ---------------------------------------------------------------- determinism
def mixed_block_messages(h: Harness) -> list[pb.Message]:
    """Setup blocks on the harness, then a long list of mixed messages for one block (some invalid)."""
    a, b, c = h.actor(units=2), h.actor(), h.actor()
    pid = created_id(h.commit(a.b.project_create("base")))
    c1 = commit_meta(1)
    h.commit(a.b.commit_bundle(pid, [c1]), a.b.ref_update(pid, MAIN, c1.hash, 1))
    new_project = a.b.project_create("in-block")
    npid = bytes(new_project.hash)
    n1 = commit_meta(10)
    msgs = [
        new_project,
        a.b.commit_bundle(npid, [n1, commit_meta(11, n1.hash)]),  # depends on the create above
        a.b.ref_update(npid, MAIN, n1.hash, 1),
        a.b.project_metadata(pid, pb.PROJECT_FIELD_TOPICS, "t"),
        a.b.collaborator_add(pid, b.address, pb.PERMISSION_WRITE),
        b.b.ref_update(pid, b"refs/heads/b", c1.hash, 1),  # depends on the collaborator above
        b.b.fork(pid, "forked"),
        c.b.star(pid),
        b.b.star(pid),
        c.b.like(pid, c1.hash),
        a.b.follow(b.address),
        b.b.follow(a.address),
        c.b.follow(a.address),
        a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "A"),
        a.b.keychain_authorize(a.wallet, a.next_nonce(), p256_key()),
        a.b.keychain_authorize(a.wallet, a.next_nonce(), webauthn_key(), admin=True),
        a.b.signer_add(a.wallet, a.next_nonce(), key=Ed25519Key.generate(), scope=pb.KEY_SCOPE_AGENT),
        a.b.verification_add(Secp256k1Key.generate()),
        h.authority.b.storage_grant(c.address, 3),
        c.b.merge_request_add(pid, pid, b"refs/heads/x", MAIN),
        # invalid ones: dropped on the proposer, never in the block
        c.b.project_create("bad name"),
        a.b.ref_update(pid, MAIN, c1.hash, 7),
        c.b.follow(c.address),
    ]
    msgs += [c.b.project_create(f"c{i}") for i in range(12)]  # 30 projects with 3 units: all fit
    msgs += [b.b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {i}", timestamp=h.now - 5 + i) for i in range(5)]
    return msgs


def test_same_block_applied_elsewhere_gives_same_root_and_writes(tmp_path: Path) -> None:
    h = Harness(tmp_path / "a")
    msgs = mixed_block_messages(h)
    other = follower(h, tmp_path / "b")
    try:
        assert root_of(other) == h.root()
        assert tree_state(other) == tree_state(h.chain)
        proposed = h.chain.build(h.now * 1000, msgs, verify=True)
        assert len(proposed.dropped) == 3 and len(proposed.applied) == len(msgs) - 3
        # apply_block twice on the same read view: identical outputs
        with other.read() as (view, nodes):
            first = apply_block(view, InProcessUpdater(nodes), other.params, proposed.block, verifier=other.verifier)
            second = apply_block(view, InProcessUpdater(nodes), other.params, proposed.block, verifier=other.verifier)
        assert dict(first.writes) == dict(second.writes)
        assert first.tree_nodes == second.tree_nodes
        assert [r.SerializeToString(deterministic=True) for r in first.applied] == [
            r.SerializeToString(deterministic=True) for r in second.applied
        ]
        # and equal to what the proposer computed
        applied = other.apply(proposed.block)
        assert dict(applied.writes) == dict(proposed.writes)
        assert applied.tree_nodes == proposed.tree_nodes
        assert not applied.dropped
        h.chain.commit(proposed)
        other.commit(applied)
        assert root_of(other) == h.root() == bytes(proposed.block.header.state_root)
        assert tree_state(other) == tree_state(h.chain)
        assert stored_block(other, other.height) == stored_block(h.chain, h.chain.height)
    finally:
        other.close()


def test_a_block_that_does_not_match_its_header_is_refused(tmp_path: Path) -> None:
    h = Harness(tmp_path / "a")
    a = h.actor()
    other = follower(h, tmp_path / "b")
    try:
        proposed = h.chain.build(
            h.now * 1000, [a.b.project_create("p"), a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x")], verify=True
        )

        def tampered(change: Callable[[pb.Message], None] | None = None, **header: object) -> InvalidBlock:
            block = type(proposed.block)()
            block.CopyFrom(proposed.block)
            for name, value in header.items():
                setattr(block.header, name, value)
            if change is not None:
                change(block.chunks[0].messages[0])
            block.hash = header_hash(block.header)
            with pytest.raises(InvalidBlock) as info:
                other.apply(block)
            return info.value

        assert tampered(state_root=bytes(32)).field == "state_root"
        assert tampered(message_count=1).field == "message_count"
        assert tampered(parent_hash=bytes(32)).field == "parent_hash"
        assert tampered(number=5).field == "number"

        def swap_body(m: pb.Message) -> None:  # the hash still lists the original: the message is dropped
            m.data.project_create.name = "q"

        assert tampered(swap_body).field == "message_count"
        # the untouched block applies
        other.commit(other.apply(proposed.block))
        assert root_of(other) == bytes(proposed.block.header.state_root)
    finally:
        other.close()


# ---------------------------------------------------------------- convergence
Make = Callable[[str, int], pb.Message]


def _follow(h: Harness) -> Make:
    a, target = h.actor(), h.new_actor().address
    return lambda kind, ts: a.b.follow(target, remove=kind == "remove", timestamp=ts)


def _like(h: Harness) -> Make:
    owner, liker = h.actor(), h.actor()
    pid = created_id(h.commit(owner.b.project_create("p")))
    c = commit_meta(1)
    h.commit(owner.b.commit_bundle(pid, [c]))
    return lambda kind, ts: liker.b.like(pid, c.hash, remove=kind == "remove", timestamp=ts)


def _collaborator(h: Harness) -> Make:
    owner = h.actor()
    pid = created_id(h.commit(owner.b.project_create("p")))
    x = h.new_actor().address

    def make(kind: str, ts: int) -> pb.Message:
        if kind == "remove":
            return owner.b.collaborator_remove(pid, x, timestamp=ts)
        permission = (pb.PERMISSION_READ, pb.PERMISSION_WRITE, pb.PERMISSION_ADMIN)[ts % 3]
        return owner.b.collaborator_add(pid, x, permission, timestamp=ts)

    return make


def _verification(h: Harness) -> Make:
    a, ext = h.actor(), Secp256k1Key.generate()

    def make(kind: str, ts: int) -> pb.Message:
        if kind == "remove":
            return a.b.verification_remove(ext.address, timestamp=ts)
        return a.b.verification_add(ext, timestamp=ts)

    return make


def _account_data(h: Harness) -> Make:
    a = h.actor()
    return lambda kind, ts: a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, f"name@{ts}", timestamp=ts)


def _project_metadata(h: Harness) -> Make:
    a = h.actor()
    pid = created_id(h.commit(a.b.project_create("p")))
    return lambda kind, ts: a.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, f"d@{ts}", timestamp=ts)


SET_FAMILIES: dict[str, Callable[[Harness], Make]] = {
    "link_follow": _follow,
    "reaction_like": _like,
    "collaborator": _collaborator,
    "verification": _verification,
}
LWW_FAMILIES: dict[str, Callable[[Harness], Make]] = {
    "account_data": _account_data,
    "project_metadata": _project_metadata,
}


@contextmanager
def two_chains(base: Path, setup: Callable[[Harness], Make]) -> Iterator[tuple[Harness, Chain, Make, int]]:
    """Chain A (a harness) and chain B (a follower) with the same history up to the initial add at t0."""
    h = Harness(base / "a")
    make = setup(h)
    t0 = h.now
    h.commit(make("add", t0))
    other = follower(h, base / "b")
    try:
        yield h, other, make, t0
    finally:
        other.close()
        h.chain.close()


def converge(
    base: Path, setup: Callable[[Harness], Make], ops: list[tuple[str, int]], order_a: list[int], order_b: list[int]
) -> None:
    """Chain A applies the ops one per block in order_a, chain B all in one block in order_b."""
    with two_chains(base, setup) as (h, other, make, t0):
        msgs = [make(kind, t0 + offset) for kind, offset in ops]
        for i in order_a:
            h.build(msgs[i])
        other.commit(other.build(h.now * 1000, [msgs[i] for i in order_b], verify=True))
        assert tree_state(other) == tree_state(h.chain)
        assert root_of(other) == h.root()


offsets = st.lists(st.integers(-120, 120).filter(lambda x: x != 0), min_size=1, max_size=5, unique=True)
CONVERGENCE = settings(
    max_examples=30, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("family", sorted(SET_FAMILIES))
@CONVERGENCE
@given(data=st.data())
def test_add_remove_sets_converge_under_any_order(
    tmp_path_factory: pytest.TempPathFactory, family: str, data: st.DataObject
) -> None:
    """Adds at distinct timestamps plus at most one remove (two removes: the test below)."""
    adds = data.draw(offsets, label="add offsets")
    remove = data.draw(st.none() | st.integers(-120, 120).filter(lambda x: x != 0 and x not in adds), label="remove")
    ops = [("add", t) for t in adds] + ([("remove", remove)] if remove is not None else [])
    order_a = data.draw(st.permutations(range(len(ops))), label="order A")
    order_b = data.draw(st.permutations(range(len(ops))), label="order B")
    converge(tmp_path_factory.mktemp(family), SET_FAMILIES[family], ops, order_a, order_b)


@pytest.mark.parametrize("family", sorted(LWW_FAMILIES))
@CONVERGENCE
@given(data=st.data())
def test_lww_registers_converge_under_any_order(
    tmp_path_factory: pytest.TempPathFactory, family: str, data: st.DataObject
) -> None:
    ops = [("set", t) for t in data.draw(offsets, label="offsets")]
    order_a = data.draw(st.permutations(range(len(ops))), label="order A")
    order_b = data.draw(st.permutations(range(len(ops))), label="order B")
    converge(tmp_path_factory.mktemp(family), LWW_FAMILIES[family], ops, order_a, order_b)


@pytest.mark.parametrize("family", sorted(SET_FAMILIES))
def test_add_remove_sets_converge_with_two_removes(tmp_path: Path, family: str) -> None:
    ops = [("remove", 10), ("remove", 20), ("add", 15)]
    converge(tmp_path, SET_FAMILIES[family], ops, [0, 1, 2], [1, 0, 2])
