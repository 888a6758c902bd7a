"""The member proof of forwarded batches: bound to the secret and to the exact messages."""

from __future__ import annotations

import os

import pytest

from chain.v1 import message_pb2 as pb
from node.server.config import parse_config
from node.server.write.membership import PROOF_KEY, MemberProof
from tests.fixtures.actors import RemoteActor

SECRET = b"members-only-secret-0123456789"


def follows(n: int) -> list[pb.Message]:
    actor = RemoteActor()
    return [actor.b.follow(os.urandom(20)) for _ in range(n)]


def test_a_proof_vouches_for_exactly_the_batch_it_was_made_for() -> None:
    proof = MemberProof(SECRET)
    msgs = follows(3)
    metadata = proof.metadata(msgs)
    assert [k for k, _ in metadata] == [PROOF_KEY]
    assert proof.vouched(metadata, msgs)
    assert MemberProof(SECRET).vouched(metadata, msgs)  # another member with the same secret
    assert not proof.vouched(metadata, msgs[:2])  # one dropped
    assert not proof.vouched(metadata, [msgs[1], msgs[0], msgs[2]])  # reordered
    assert not proof.vouched(metadata, [*msgs, *follows(1)])  # one added
    changed = pb.Message()
    changed.CopyFrom(msgs[0])
    changed.signature = bytes(64)
    assert not proof.vouched(metadata, [changed, *msgs[1:]])  # one byte of one message


def test_no_proof_a_wrong_secret_or_no_secret_here_is_not_vouched() -> None:
    msgs = follows(2)
    proof = MemberProof(SECRET)
    assert not proof.vouched((), msgs)
    assert not proof.vouched(None, msgs)
    assert not proof.vouched(MemberProof(b"another-secret-0123456789").metadata(msgs), msgs)
    assert not proof.vouched(((PROOF_KEY, "00" * 32),), msgs)
    assert not proof.vouched(((PROOF_KEY, b"\xff" * 64),), msgs)
    assert not MemberProof().vouched(proof.metadata(msgs), msgs)  # this node has no secret
    assert MemberProof().metadata(msgs) == ()  # and sends no proof


def test_the_secret_is_never_shown() -> None:
    assert "secret" not in repr(MemberProof(SECRET)).replace("enabled", "")
    with pytest.raises(ValueError, match="at least 16 bytes"):
        MemberProof(b"short")


def test_the_secret_comes_from_its_file_or_the_environment(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "secret")
    with open(path, "wb") as f:
        f.write(SECRET + b"\n")
    cfg = parse_config(["--cluster-secret-file", path], env={})
    assert cfg.cluster_secret == SECRET
    assert SECRET.decode() not in repr(cfg)
    assert parse_config([], env={"CHAIN_NODE_CLUSTER_SECRET": SECRET.decode()}).cluster_secret == SECRET
    assert parse_config([], env={}).cluster_secret == b""
    with pytest.raises(SystemExit):  # given twice
        parse_config(["--cluster-secret-file", path], env={"CHAIN_NODE_CLUSTER_SECRET": SECRET.decode()})
