import dataclasses

import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node.errors import InvalidArgument, NotFound
from node.merkle.wire import proof_from_proto, proof_to_proto
from node.query.reader import Reader
from node.sdk.proofs import verify_operation_proof, verify_storage_quota_proof
from node.storage import schema
from tests.harness import Harness, commit_meta


@pytest.fixture
def h(tmp_path):
    return Harness(tmp_path / "chain")


def reader_call(h, method, request):
    with h.chain.read() as (view, nodes):
        return getattr(Reader(view, nodes), method)(request)


def walk(h, method, request, field):
    """Follow next_page_token to the end; return every item and the page sizes."""
    items, sizes = [], []
    while True:
        resp = reader_call(h, method, request)
        page = list(getattr(resp, field))
        items.extend(page)
        sizes.append(len(page))
        if not resp.next_page_token:
            return items, sizes
        request.page_token = resp.next_page_token


def test_pagination_caps_at_200_and_visits_every_item_once(h):
    alice = h.actor()
    pid = h.commit(alice.b.project_create("big")).applied[0].message.hash
    commits = [commit_meta(i) for i in range(450)]
    h.commit(alice.b.commit_bundle(pid, commits))
    items, sizes = walk(h, "list_commits", rpc_pb2.ListCommitsRequest(project_id=pid, page_size=1000), "commits")
    assert sizes == [200, 200, 50]
    assert [c.hash for c in items] == [c.hash for c in reversed(commits)]  # newest first
    assert len({c.hash for c in items}) == 450
    items, sizes = walk(h, "list_commits", rpc_pb2.ListCommitsRequest(project_id=pid), "commits")
    assert sizes == [50] * 9
    assert len({c.hash for c in items}) == 450


def test_refs_and_ref_log_pagination(h):
    alice = h.actor()
    pid = h.commit(alice.b.project_create("refs")).applied[0].message.hash
    c = commit_meta(1)
    h.commit(alice.b.commit_bundle(pid, [c]))
    names = [f"refs/heads/b{i:03}".encode() for i in range(200)]
    h.commit(*[alice.b.ref_update(pid, n, c.hash, 1) for n in names])
    items, sizes = walk(h, "list_refs", rpc_pb2.ListRefsRequest(project_id=pid, page_size=70), "refs")
    assert sizes == [70, 70, 60]
    assert sorted(r.name for r in items) == sorted(names)
    log = reader_call(h, "get_ref_log", rpc_pb2.GetRefLogRequest(project_id=pid, ref_name=names[0]))
    assert [e.new_hash for e in log.entries] == [c.hash]
    assert log.entries[0].owner_address == alice.address


def test_every_account_listing_uses_owner_address(h):
    alice, bob = h.actor(), h.actor()
    pid = h.commit(alice.b.project_create("p1")).applied[0].message.hash
    c = commit_meta(7)
    h.commit(alice.b.commit_bundle(pid, [c]))
    h.commit(bob.b.follow(alice.address), bob.b.star(pid), bob.b.like(pid, c.hash), alice.b.project_create("p2"))
    owner_req = rpc_pb2.ListProjectsRequest(owner_address=alice.address)
    assert {p.name for p in reader_call(h, "list_projects", owner_req).projects} == {"p1", "p2"}
    assert reader_call(h, "search_projects", rpc_pb2.SearchProjectsRequest(name_prefix="P")).projects
    links = reader_call(h, "list_links", rpc_pb2.ListLinksRequest(owner_address=bob.address)).links
    assert len(links) == 2
    stars = reader_call(h, "list_links", rpc_pb2.ListLinksRequest(owner_address=bob.address, type=pb.LINK_TYPE_STAR))
    assert [link.target_project_id for link in stars.links] == [pid]
    by_target = reader_call(
        h, "list_links_by_target", rpc_pb2.ListLinksByTargetRequest(target_owner_address=alice.address)
    )
    assert [link.owner_address for link in by_target.links] == [bob.address]
    likes = reader_call(
        h, "list_reactions_by_target", rpc_pb2.ListReactionsByTargetRequest(project_id=pid, commit_hash=c.hash)
    )
    assert [r.owner_address for r in likes.reactions] == [bob.address]
    account = reader_call(h, "get_account", rpc_pb2.GetAccountRequest(owner_address=alice.address))
    assert account.account.project_count == 2
    assert account.storage_units == 1
    assert [k.key for k in account.keys] == [alice.key.public_key]
    activity = reader_call(h, "get_account_activity", rpc_pb2.GetAccountActivityRequest(owner_address=bob.address))
    assert len(activity.messages) == 4  # signer add + follow + star + like, newest first
    assert activity.messages[0].event_id > activity.messages[-1].event_id


def test_missing_account_reads_as_zero(h):
    resp = reader_call(h, "get_account", rpc_pb2.GetAccountRequest(owner_address=b"\x01" * 20))
    assert resp.account.project_count == 0
    assert resp.storage_units == 0


def test_bad_requests_are_typed(h):
    with pytest.raises(InvalidArgument) as exc:
        reader_call(h, "get_account", rpc_pb2.GetAccountRequest(owner_address=b"\x01" * 19))
    assert exc.value.field == "owner_address"
    with pytest.raises(NotFound):
        reader_call(h, "get_project", rpc_pb2.GetProjectRequest(project_id=b"\x00" * 32))
    with pytest.raises(InvalidArgument):
        reader_call(h, "list_refs", rpc_pb2.ListRefsRequest(project_id=b"\x00" * 32, page_token="%%%"))
    other = reader_call(h, "list_blocks", rpc_pb2.ListBlocksRequest(page_size=1)).next_page_token
    with pytest.raises(InvalidArgument):
        reader_call(h, "list_refs", rpc_pb2.ListRefsRequest(project_id=b"\x00" * 32, page_token=other))


def test_blocks_and_messages(h):
    alice = h.actor()
    h.commit(*[alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {i}", timestamp=h.now + i) for i in range(5)])
    height = h.chain.height
    blocks, _ = walk(h, "list_blocks", rpc_pb2.ListBlocksRequest(page_size=2), "blocks")
    assert [b.header.number for b in blocks] == list(range(height, -1, -1))
    assert all(not b.chunks for b in blocks)
    block = reader_call(h, "get_block", rpc_pb2.GetBlockRequest(block_number=height)).block
    assert block.header.message_count == 5
    msgs, sizes = walk(h, "list_messages", rpc_pb2.ListMessagesRequest(start_block=1, page_size=3), "messages")
    assert [m.event_id for m in msgs] == list(range(1, len(msgs) + 1))
    assert sizes[:-1] == [3] * (len(sizes) - 1)
    got = reader_call(h, "get_message", rpc_pb2.GetMessageRequest(hash=msgs[-1].message.hash)).message
    assert got.block_number == height


def test_commit_ancestors_walk(h):
    alice = h.actor()
    pid = h.commit(alice.b.project_create("graph")).applied[0].message.hash
    a = commit_meta(1)
    b = commit_meta(2, a.hash)
    c = commit_meta(3, a.hash)
    m = commit_meta(4, b.hash, c.hash)
    h.commit(alice.b.commit_bundle(pid, [a, b, c, m]))
    resp = reader_call(h, "get_commit_ancestors", rpc_pb2.GetCommitAncestorsRequest(project_id=pid, commit_hash=m.hash))
    assert [x.hash for x in resp.commits] == [b.hash, c.hash, a.hash]
    first = rpc_pb2.GetCommitAncestorsRequest(project_id=pid, commit_hash=m.hash, first_parent=True)
    assert [x.hash for x in reader_call(h, "get_commit_ancestors", first).commits] == [b.hash, a.hash]
    items, sizes = walk(
        h,
        "get_commit_ancestors",
        rpc_pb2.GetCommitAncestorsRequest(project_id=pid, commit_hash=m.hash, page_size=2),
        "commits",
    )
    assert [x.hash for x in items] == [b.hash, c.hash, a.hash]
    assert sizes == [2, 1]


def test_operation_and_exclusion_proofs_verify_offline(h):
    alice = h.actor()
    key = schema.account_key(alice.address)
    resp = reader_call(h, "get_operation_proof", rpc_pb2.GetOperationProofRequest(key=key))
    assert verify_operation_proof(resp.proof, resp.state_root)
    assert resp.state_root == h.root()
    absent = schema.account_key(b"\x09" * 20)
    exc = reader_call(h, "get_exclusion_proof", rpc_pb2.GetExclusionProofRequest(key=absent))
    assert not exc.proof.exists
    assert verify_operation_proof(exc.proof, exc.state_root)
    with pytest.raises(NotFound):
        reader_call(h, "get_operation_proof", rpc_pb2.GetOperationProofRequest(key=absent))
    with pytest.raises(InvalidArgument):
        reader_call(h, "get_exclusion_proof", rpc_pb2.GetExclusionProofRequest(key=key))
    with pytest.raises(InvalidArgument):
        reader_call(h, "get_operation_proof", rpc_pb2.GetOperationProofRequest(key=schema.block_key(1)))
    # a tampered value fails offline
    forged = proof_from_proto(resp.proof)
    assert forged.value is not None
    forged = dataclasses.replace(forged, value=forged.value + b"\x00")
    assert not verify_operation_proof(proof_to_proto(forged), resp.state_root)


def test_verify_operation_proof_reports_stale(h):
    alice = h.actor()
    key = schema.account_key(alice.address)
    old = reader_call(h, "get_operation_proof", rpc_pb2.GetOperationProofRequest(key=key))
    check = rpc_pb2.VerifyOperationProofRequest(proof=old.proof, state_root=old.state_root)
    assert reader_call(h, "verify_operation_proof", check).valid
    h.commit(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "changed"))
    resp = reader_call(h, "verify_operation_proof", check)
    assert not resp.valid
    assert resp.stale
    assert resp.current_root == h.root()


def test_storage_quota_proof_bundle(h):
    alice = h.actor(units=2)
    h.commit(h.authority.b.storage_grant(alice.address, 3))
    bundle = reader_call(h, "get_storage_quota_proof", rpc_pb2.GetStorageQuotaProofRequest(owner_address=alice.address))
    proof = bundle.proof
    assert proof.active_units == 5
    assert verify_storage_quota_proof(proof, h.root()) == 5
    dropped = type(proof)()
    dropped.CopyFrom(proof)
    del dropped.grant_proofs[0]  # hiding a grant is detected
    assert verify_storage_quota_proof(dropped, h.root()) is None
    inflated = type(proof)()
    inflated.CopyFrom(proof)
    inflated.active_units = 6
    assert verify_storage_quota_proof(inflated, h.root()) is None
    assert verify_storage_quota_proof(proof, b"\x00" * 32) is None
