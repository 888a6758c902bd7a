"""A chain on a real LMDB store in a temporary directory, with a controllable clock.

Tests drive it the way the node does: build a block from messages, commit it,
then read state back.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import merkle
from node.chain import Chain
from node.codec import blake3_256
from node.errors import MessageRejected, Reason
from node.params import ChainParams
from node.sdk.keys import Ed25519Key, Secp256k1Key
from node.sdk.messages import MessageBuilder
from node.state.access import StateAccess
from node.state.transition import BlockOutput
from node.storage import schema
from node.storage.kv import DictView, Overlay

START = 1_800_000_000


@dataclass
class Actor:
    wallet: Secp256k1Key
    key: Ed25519Key
    b: MessageBuilder
    custody_nonce: int = 0

    @property
    def address(self) -> bytes:
        return self.wallet.address

    def next_nonce(self) -> int:
        nonce = self.custody_nonce
        self.custody_nonce += 1
        return nonce


class Harness:
    def __init__(self, path: Path) -> None:
        self.now = START
        self.authority = self.new_actor()
        params = ChainParams(storage_authorities=frozenset({self.authority.address}), genesis_time_ms=START * 1000)
        self.chain = Chain.open(path, params)
        self.commit(self.authority.b.signer_add(self.authority.wallet, self.authority.next_nonce()))

    def clock(self) -> float:
        return float(self.now)

    def new_actor(self) -> Actor:
        wallet = Secp256k1Key.generate()
        key = Ed25519Key.generate()
        return Actor(wallet=wallet, key=key, b=MessageBuilder(wallet.address, key, clock=self.clock))

    def actor(self, *, units: int = 1, register: bool = True) -> Actor:
        """A new account with a registered OWNER delegated key and `units` of storage."""
        actor = self.new_actor()
        msgs = []
        if register:
            msgs.append(actor.b.signer_add(actor.wallet, actor.next_nonce()))
        if units:
            msgs.append(self.authority.b.storage_grant(actor.address, units))
        if msgs:
            self.commit(*msgs)
        return actor

    def build(self, *msgs: pb.Message) -> BlockOutput:
        out = self.chain.build(self.now * 1000, list(msgs), verify=True)
        self.chain.commit(out)
        self.now += 1
        return out

    def commit(self, *msgs: pb.Message) -> BlockOutput:
        """Every message must be accepted."""
        out = self.build(*msgs)
        assert not out.dropped, [(d.error.reason, d.error.detail) for d in out.dropped]
        return out

    def reject(self, msg: pb.Message, reason: Reason) -> MessageRejected:
        """The message must be dropped with `reason`; nothing is written for it."""
        root = self.root()
        out = self.build(msg)
        got = [(d.error.reason, d.error.detail) for d in out.dropped]
        assert [r for r, _ in got] == [reason], got
        assert self.root() == root
        return out.dropped[0].error

    def root(self) -> bytes:
        return bytes(self.chain.head().header.state_root)

    def state(self) -> StateAccess:
        """A read-only view of committed state (valid until the next commit)."""
        with self.chain.read() as (view, _):
            items = dict(view.scan(b""))
        return StateAccess(Overlay(DictView(items)))

    def project(self, project_id: bytes) -> state_pb2.Project:
        project = self.state().project(project_id)
        assert project is not None
        return project

    def account(self, owner: bytes) -> state_pb2.Account:
        return self.state().account_or_new(owner)


def commit_meta(seed: int, *parents: bytes) -> pb.CommitMeta:
    return pb.CommitMeta(
        hash=blake3_256(b"commit" + seed.to_bytes(8, "big")),
        parents=list(parents),
        title=f"commit {seed}",
        author_name="dev",
        author_timestamp=START,
    )


def commit_line(start: int, n: int, parent: bytes | None = None) -> list[pb.CommitMeta]:
    """n commits, each the parent of the next (seeds start..start+n-1), the first on `parent`."""
    out: list[pb.CommitMeta] = []
    for i in range(start, start + n):
        prev = out[-1].hash if out else parent
        out.append(commit_meta(i, *([prev] if prev else [])))
    return out


def random_message(rng: random.Random, h: Harness, actors: list[Actor], projects: list[bytes]) -> pb.Message:
    """A mix of the common writes, some of which do not apply (stale or future times at and around the limits,
    no project yet, removals of follows that never were)."""
    actor = rng.choice(actors)
    skew = rng.choice([0, 0, 0, 0, -1, -299, -300, -301, 1, 299, 300, 301, 305])
    ts = h.now + skew
    kind = rng.randrange(8)
    if kind == 0:
        return actor.b.follow(rng.randbytes(20), timestamp=ts)
    if kind == 1:
        return actor.b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {rng.random()}", timestamp=ts)
    if kind == 2:
        return actor.b.project_create(f"p{rng.randrange(10**9)}", timestamp=ts)
    if kind == 3 and projects:
        return actor.b.commit_bundle(rng.choice(projects), [commit_meta(rng.randrange(10**9))], timestamp=ts)
    if kind == 4 and projects:
        return actor.b.star(rng.choice(projects), timestamp=ts)
    if kind == 5:
        return actor.b.verification_add(Secp256k1Key.generate(), timestamp=ts)
    if kind == 6:
        return h.authority.b.storage_grant(rng.choice(actors).address, 1, timestamp=ts)
    return actor.b.follow(rng.randbytes(20), remove=True, timestamp=ts)


def recomputed_root(chain: Chain) -> bytes:
    """The state root rebuilt from scratch over every stored public-state record."""
    with chain.read() as (view, _):
        items = {k: v for k, v in view.scan(b"") if schema.in_tree(k)}
    return merkle.build_tree(items).root
