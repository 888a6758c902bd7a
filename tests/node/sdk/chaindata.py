"""A small chain with something behind every read, written through the SDK: two funded accounts (alice and
bob), alice's project with three commits, two refs (main moved twice), bob's fork and merge request, a
collaborator, a verification, a custody key, a follow, a star and a like."""

from __future__ import annotations

from dataclasses import dataclass

from chain.v1 import message_pb2 as pb
from node.crypto.hashing import blake3_256
from node.sdk.authority import Authority
from node.sdk.keys import P256Key, Secp256k1Key
from node.sdk.rpc import ChainClient
from tests.fixtures.actors import RemoteActor, new_account

MAIN = b"refs/heads/main"
TOPIC = b"refs/heads/topic"


def commit_meta(seed: int, *parents: bytes) -> pb.CommitMeta:
    """A commit with a made-up hash and tree (the chain stores metadata, not objects)."""
    return pb.CommitMeta(
        hash=blake3_256(b"commit" + seed.to_bytes(8, "big")),
        parents=list(parents),
        tree_hash=blake3_256(b"tree" + seed.to_bytes(8, "big")),
        title=f"commit {seed}",
        author_name="dev",
        author_timestamp=1_700_000_000 + seed,
    )


@dataclass(frozen=True)
class ChainData:
    alice: RemoteActor
    bob: RemoteActor
    project_id: bytes
    fork_id: bytes
    commits: tuple[bytes, ...]  # oldest first
    merge_request_id: bytes
    verified: bytes  # the external address alice verified
    custody_key_id: bytes  # the P-256 custody key alice's wallet authorized
    message_hash: bytes  # alice's project_create


def build(client: ChainClient, authority: Authority) -> ChainData:
    """Write the chain's data through `client`; every message committed."""
    alice, bob = new_account(client, authority, units=5), new_account(client, authority, units=5)
    (create,) = client.commit(alice.b.project_create("hello", "the SDK's test project"))
    pid = bytes(create.message.hash)
    c1 = commit_meta(1)
    c2 = commit_meta(2, c1.hash)
    c3 = commit_meta(3, c2.hash)
    client.commit(alice.b.commit_bundle(pid, [c1, c2, c3]))
    client.commit(alice.b.ref_update(pid, MAIN, c2.hash, 1), alice.b.ref_update(pid, TOPIC, c1.hash, 1))
    client.commit(alice.b.ref_update(pid, MAIN, c3.hash, 2, old_hash=c2.hash))
    (fork,) = client.commit(bob.b.fork(pid, "hello-fork"))
    fork_id = bytes(fork.message.hash)
    (mr,) = client.commit(bob.b.merge_request_add(pid, fork_id, MAIN, MAIN, "a change"))
    external = Secp256k1Key.generate()
    p256 = P256Key.generate()
    client.commit(alice.b.keychain_authorize(alice.wallet, 1, p256))
    client.commit(
        alice.b.collaborator_add(pid, bob.address, pb.PERMISSION_WRITE),
        alice.b.verification_add(external),
        alice.b.follow(bob.address),
        bob.b.star(pid),
        bob.b.like(pid, c3.hash),
    )
    return ChainData(
        alice=alice,
        bob=bob,
        project_id=pid,
        fork_id=fork_id,
        commits=(bytes(c1.hash), bytes(c2.hash), bytes(c3.hash)),
        merge_request_id=bytes(mr.message.hash),
        verified=external.address,
        custody_key_id=p256.address,
        message_hash=pid,
    )
