"""A small real chain that uses every message type once or more, built with tests/harness.py.

Every message of the scenario is committed (the harness asserts that none is dropped), so each message
vector is a message a node accepted, and the final state is what the proof vectors prove against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from chain.v1 import message_pb2 as pb
from node.codec import blake3_256
from node.sdk.messages import MessageBuilder
from node.storage import chainlog
from tests.conformance import fixed
from tests.harness import Actor, Harness

ACTOR_NAMES = ("authority", "alice", "bob", "carol")


class ConformanceHarness(Harness):
    """The test harness with named, deterministic actors (authority, alice, bob, ...) instead of random ones."""

    def __init__(self, path: Path) -> None:
        self._names = iter(ACTOR_NAMES)
        super().__init__(path)

    def new_actor(self) -> Actor:
        name = next(self._names)
        wallet, key = fixed.secp256k1(f"{name}/wallet"), fixed.ed25519(f"{name}/ed25519")
        return Actor(wallet=wallet, key=key, b=MessageBuilder(wallet.address, key, clock=self.clock))


@dataclass
class Recorded:
    label: str
    message: pb.Message
    block: int
    block_time: int
    note: str = ""


@dataclass
class Scenario:
    h: ConformanceHarness
    alice: Actor
    bob: Actor
    project_id: bytes
    recorded: list[Recorded] = field(default_factory=list)

    def commit(self, label: str, msg: pb.Message, note: str = "") -> pb.Message:
        out = self.h.commit(msg)
        header = out.block.header
        self.recorded.append(Recorded(label, msg, header.number, header.timestamp_ms // 1000, note))
        return msg


def commit(seed: int, *parents: bytes) -> pb.CommitMeta:
    return pb.CommitMeta(
        hash=blake3_256(b"commit" + seed.to_bytes(8, "big")),
        parents=list(parents),
        tree_hash=blake3_256(b"tree" + seed.to_bytes(8, "big")),
        title=f"commit {seed}",
        author_name="dev",
        author_timestamp=fixed.T0,
    )


def _accounts(h: ConformanceHarness) -> tuple[Scenario, Actor]:
    alice, bob = h.new_actor(), h.new_actor()
    s = Scenario(h, alice, bob, b"")
    s.recorded.append(
        Recorded("signer_add_authority_bootstrap", _bootstrap(h), 1, fixed.T0, "the harness's first block")
    )
    s.commit("signer_add", alice.b.signer_add(alice.wallet, alice.next_nonce()), "root wallet (secp256k1)")
    s.commit("storage_grant", h.authority.b.storage_grant(alice.address, 2), "signed by the storage authority")
    s.commit("signer_add_bob", bob.b.signer_add(bob.wallet, bob.next_nonce()))
    s.commit("storage_grant_bob", h.authority.b.storage_grant(bob.address, 1))
    s.commit("storage_grant_second", h.authority.b.storage_grant(alice.address, 3), "a second grant: two in the index")
    return s, alice


def _bootstrap(h: ConformanceHarness) -> pb.Message:
    """The harness's first message (block 1): the authority's SIGNER_ADD."""
    with h.chain.read() as (view, _):
        block = chainlog.read_block(view, 1)
    assert block is not None
    return block.chunks[0].messages[0]


def _keychain(s: Scenario) -> None:
    alice = s.alice
    p256, passkey = fixed.p256("alice/p256"), fixed.WebAuthn("alice/passkey")
    s.commit(
        "keychain_authorize",
        alice.b.keychain_authorize(alice.wallet, alice.next_nonce(), p256, admin=True),
        "admin P-256 key, authorized by the root wallet",
    )
    s.commit(
        "keychain_authorize_webauthn",
        alice.b.keychain_authorize(p256, alice.next_nonce(), passkey),
        "passkey (WebAuthn), authorized by the P-256 admin key",
    )
    agent = fixed.ed25519("alice/agent")
    s.commit(
        "signer_add_agent_by_passkey",
        alice.b.signer_add(passkey, alice.next_nonce(), key=agent, scope=pb.KEY_SCOPE_AGENT),
        "AGENT key authorized by the passkey; the envelope is signed by the added key",
    )
    stranger = MessageBuilder(alice.address, fixed.ed25519("stranger"), clock=s.h.clock)
    s.commit(
        "signer_remove",
        stranger.signer_remove(p256, alice.next_nonce(), agent.public_key),
        "envelope signed by an Ed25519 key that is not registered: custody-authorized types skip the signer check",
    )
    s.commit(
        "keychain_revoke",
        alice.b.keychain_revoke(p256, alice.next_nonce(), passkey.address),
        "revoked by the P-256 admin key",
    )


def _projects(s: Scenario) -> None:
    alice, bob = s.alice, s.bob
    create = s.commit("project_create", alice.b.project_create("hello", "conformance"))
    s.project_id = pid = bytes(create.hash)
    s.commit("project_metadata", alice.b.project_metadata(pid, pb.PROJECT_FIELD_WEBSITE, "https://example.org"))
    c1, c2 = commit(1), commit(2, commit(1).hash)
    s.commit("commit_bundle", alice.b.commit_bundle(pid, [c1, c2]))
    s.commit("ref_update", alice.b.ref_update(pid, b"refs/heads/main", c2.hash, 1))
    s.commit("ref_update_topic", alice.b.ref_update(pid, b"refs/heads/topic", c1.hash, 1))
    s.commit("ref_delete", alice.b.ref_delete(pid, b"refs/heads/topic", 2, old_hash=c1.hash))
    fork = s.commit("fork", bob.b.fork(pid, "hello-fork"))
    mr = s.commit(
        "merge_request_add",
        bob.b.merge_request_add(pid, bytes(fork.hash), b"refs/heads/main", b"refs/heads/main", "a change"),
    )
    s.commit("merge_request_remove", bob.b.merge_request_remove(pid, bytes(mr.hash)))
    s.commit("collaborator_add", alice.b.collaborator_add(pid, bob.address, pb.PERMISSION_WRITE))
    s.commit("collaborator_remove", alice.b.collaborator_remove(pid, bob.address))
    other = s.commit("project_create_other", alice.b.project_create("scratch"))
    s.commit("project_archive", alice.b.project_archive(bytes(other.hash)))
    s.commit("project_remove", alice.b.project_remove(bytes(other.hash)))


def _social(s: Scenario) -> None:
    alice, pid = s.alice, s.project_id
    s.commit("account_data", alice.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "Alice"))
    s.commit(
        "verification_add",
        alice.b.verification_add(fixed.secp256k1("alice/external")),
        "claim signed over VerificationClaim.timestamp = MessageData.timestamp",
    )
    s.commit("verification_remove", alice.b.verification_remove(fixed.secp256k1("alice/external").address))
    s.commit("link_add", alice.b.follow(s.bob.address))
    s.commit("link_remove", alice.b.follow(s.bob.address, remove=True))
    s.commit("link_add_star", alice.b.star(pid))
    s.commit("reaction_add", alice.b.like(pid, commit(2).hash))
    s.commit("reaction_remove", alice.b.like(pid, commit(2).hash, remove=True))


def build(path: Path) -> Scenario:
    """The whole scenario on a fresh chain under `path`."""
    h = ConformanceHarness(path)
    s, _ = _accounts(h)
    _keychain(s)
    _projects(s)
    _social(s)
    return s
