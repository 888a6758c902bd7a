from chain.v1 import message_pb2 as pb
from tests.harness import Harness, commit_meta


def test_newcomer_flow(tmp_path):
    h = Harness(tmp_path / "chain")
    alice = h.actor()
    out = h.commit(alice.b.project_create("hello"))
    pid = out.applied[0].message.hash
    c1 = commit_meta(1)
    c2 = commit_meta(2, c1.hash)
    h.commit(alice.b.commit_bundle(pid, [c1, c2]))
    h.commit(alice.b.ref_update(pid, b"refs/heads/main", c1.hash, 1))
    h.commit(alice.b.ref_update(pid, b"refs/heads/main", c2.hash, 2, old_hash=c1.hash))
    project = h.project(pid)
    assert project.name == "hello"
    assert project.commit_count == 2
    assert project.ref_count == 1
    assert h.account(alice.address).project_count == 1
    assert h.chain.height == 6
    ref = h.state().ref(pid, b"refs/heads/main")
    assert ref is not None
    assert ref.hash == c2.hash
    assert h.chain.params.network == pb.NETWORK_DEVNET
