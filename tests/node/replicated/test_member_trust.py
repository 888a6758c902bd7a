"""Trust between the members of a cluster (docs/replication.md, Trust between members), on real etcd.

Followers verify what they forward and prove, with the cluster secret, that a batch comes from a member;
the leader then does not verify its signatures again, on its internal listener and from a peer that completed
mutual TLS. Anything else (no proof, a wrong one, the public port) is verified in full.
"""

from __future__ import annotations

import os
from pathlib import Path

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.errors import Reason
from node.server.write.membership import MemberProof
from node.tls import sync_channel
from tests.fixtures.certs import TestCA
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ReplicaSet, assert_same_chain, funded_actors, leader_index, status, wait_height

SECRET = b"cluster-secret-for-tests-0123456789"


def forged_follow(actor_builder_follow: pb.Message) -> pb.Message:
    forged = pb.Message()
    forged.CopyFrom(actor_builder_follow)
    forged.signature = bytes(64)  # well-formed, but not a signature of its hash
    return forged


def submit(node: NodeProcess, msgs: list[pb.Message], metadata: tuple[tuple[str, str], ...]) -> rpc_pb2.SubmitResult:
    """To the public port, as any client."""
    with node.client() as c:
        request = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs)
        (result,) = c.stub.BatchSubmitMessages(request, metadata=metadata, timeout=10).results
        return result


def submit_as_member(
    node: NodeProcess, msgs: list[pb.Message], metadata: tuple[tuple[str, str], ...]
) -> rpc_pb2.SubmitResult:
    """To the internal listener, with a member's certificate (as a follower forwards)."""
    assert node.tls is not None
    with sync_channel(f"grpcs://{node.internal_target}", node.tls.client_tls()) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        request = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs)
        (result,) = stub.BatchSubmitMessages(request, metadata=metadata, timeout=10).results
        return result


def test_forwarded_batches_are_trusted_only_with_the_members_proof(tmp_path: Path, etcd1: EtcdCluster) -> None:
    secret_file = tmp_path / "cluster-secret"
    secret_file.write_bytes(SECRET + b"\n")
    ca = TestCA.make(tmp_path / "pki")
    nodes = ReplicaSet(tmp_path / "nodes", etcd1, "--cluster-secret-file", str(secret_file), tls=ca).start(2)
    try:
        li = leader_index(nodes)
        leader, follower = nodes.nodes[li], nodes.nodes[1 - li]
        with follower.client() as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]

        # a follower verifies, then forwards with its proof: valid writes commit on every member
        good = [actor.b.follow(os.urandom(20)) for _ in range(20)]
        with follower.client() as c:
            c.commit(*good)
        # a forged signature submitted to a follower is refused there (never forwarded)
        bad = forged_follow(actor.b.follow(os.urandom(20)))
        assert submit(follower, [bad], ()).reason_code == Reason.INVALID_SIGNATURE.value

        # straight to the leader's internal listener with a member's certificate: no proof, a proof under
        # another secret, or a proof made for other messages, and the signatures are verified
        forged = forged_follow(actor.b.follow(os.urandom(20)))
        other = actor.b.follow(os.urandom(20))
        for metadata in ((), MemberProof(b"not-the-cluster-secret-0123").metadata([forged]),
                         MemberProof(SECRET).metadata([other])):  # fmt: skip
            result = submit_as_member(leader, [forged], metadata)
            assert not result.accepted and result.reason_code == Reason.INVALID_SIGNATURE.value, metadata
        # the right proof on the public port: ignored, verified in full (whoever learns the secret cannot
        # skip the checks from outside)
        result = submit(leader, [forged], MemberProof(SECRET).metadata([forged]))
        assert not result.accepted and result.reason_code == Reason.INVALID_SIGNATURE.value

        # with the members' proof, from a member over mutual TLS, the leader takes the batch as verified (the
        # trust model, documented): it validates it against its state and orders it, and followers apply it
        result = submit_as_member(leader, [forged], MemberProof(SECRET).metadata([forged]))
        assert result.accepted, result
        stale = actor.b.follow(os.urandom(20), timestamp=1)  # still validated against state, proof or not
        result = submit_as_member(leader, [stale], MemberProof(SECRET).metadata([stale]))
        assert not result.accepted and result.reason_code != Reason.INVALID_SIGNATURE.value
        with leader.client() as c:
            c.wait_committed(bytes(forged.hash))
            for m in good:
                c.wait_committed(bytes(m.hash))
        height = max(status(n).block_height for n in nodes.nodes)
        wait_height(nodes.nodes, height)
        assert_same_chain(nodes.nodes, height)
    finally:
        nodes.stop()
