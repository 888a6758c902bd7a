"""Every typed read of ChainClient against a real node holding data (tests/node/sdk/chaindata.py): one call
each, its answer checked; the table covers every read RPC of the two public services (the list is taken
from the service descriptors), and every paginated read's `iter_*` walks pages of one item."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import proof_pb2, rpc_pb2
from node.sdk import statekeys
from node.sdk.codegen import iter_name, reads
from node.sdk.proofs import ExclusionProof, InclusionProof, QuotaProof
from node.sdk.rpc import ChainClient
from tests.fixtures.nodeproc import NodeProcess
from tests.node.sdk.chaindata import MAIN, ChainData, build


class World:
    def __init__(self, node: NodeProcess, client: ChainClient, data: ChainData) -> None:
        self.node = node
        self.c = client
        self.d = data


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    node = NodeProcess(tmp_path_factory.mktemp("reads") / "data").start()
    client = node.client()
    try:
        data = build(client, node.authority())
        assert client.admin is not None
        client.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest(), timeout=30)
        yield World(node, client, data)
    finally:
        client.close()
        node.stop()


def _proof_root(w: World, proof: InclusionProof | ExclusionProof) -> bytes:
    return bytes(w.c.get_block(block_number=proof.block_number).block.header.state_root)


def _head(w: World) -> int:
    return int(w.c.get_node_status().status.block_height)


# method name -> (the call, a check of its answer)
Case = tuple[Callable[[World], Any], Callable[[World, Any], bool]]
CASES: dict[str, Case] = {
    "get_project": (lambda w: w.c.get_project(project_id=w.d.project_id), lambda w, r: r.project.name == "hello"),
    "get_project_by_name": (
        lambda w: w.c.get_project_by_name(owner_address=w.d.alice.address, name="hello"),
        lambda w, r: r.project.project_id == w.d.project_id,
    ),
    "search_projects": (
        lambda w: w.c.search_projects(name_prefix="hello"),
        lambda w, r: {p.name for p in r.projects} == {"hello", "hello-fork"},
    ),
    "list_projects": (
        lambda w: w.c.list_projects(owner_address=w.d.bob.address),
        lambda w, r: [p.project_id for p in r.projects] == [w.d.fork_id],
    ),
    "get_project_activity": (
        lambda w: w.c.get_project_activity(project_id=w.d.project_id),
        lambda w, r: w.d.project_id in [m.message.hash for m in r.messages],
    ),
    "get_merge_request": (
        lambda w: w.c.get_merge_request(project_id=w.d.project_id, request_id=w.d.merge_request_id),
        lambda w, r: r.merge_request.title == "a change",
    ),
    "list_merge_requests": (
        lambda w: w.c.list_merge_requests(project_id=w.d.project_id),
        lambda w, r: [m.request_id for m in r.merge_requests] == [w.d.merge_request_id],
    ),
    "list_merge_requests_by_requester": (
        lambda w: w.c.list_merge_requests_by_requester(owner_address=w.d.bob.address),
        lambda w, r: [m.request_id for m in r.merge_requests] == [w.d.merge_request_id],
    ),
    "get_ref": (
        lambda w: w.c.get_ref(project_id=w.d.project_id, ref_name=MAIN),
        lambda w, r: r.ref.hash == w.d.commits[2],
    ),
    "list_refs": (lambda w: w.c.list_refs(project_id=w.d.project_id), lambda w, r: len(r.refs) == 2),
    "get_ref_log": (
        lambda w: w.c.get_ref_log(project_id=w.d.project_id, ref_name=MAIN),
        lambda w, r: [e.new_hash for e in r.entries] == [w.d.commits[2], w.d.commits[1]],
    ),
    "get_commit": (
        lambda w: w.c.get_commit(project_id=w.d.project_id, commit_hash=w.d.commits[0]),
        lambda w, r: r.commit.title == "commit 1",
    ),
    "list_commits": (
        lambda w: w.c.list_commits(project_id=w.d.project_id),
        lambda w, r: [c.hash for c in r.commits] == list(reversed(w.d.commits)),
    ),
    "get_commit_ancestors": (
        lambda w: w.c.get_commit_ancestors(project_id=w.d.project_id, commit_hash=w.d.commits[2]),
        lambda w, r: [c.hash for c in r.commits] == [w.d.commits[1], w.d.commits[0]],
    ),
    "list_collaborators": (
        lambda w: w.c.list_collaborators(project_id=w.d.project_id),
        lambda w, r: [c.owner_address for c in r.collaborators] == [w.d.bob.address],
    ),
    "get_account": (
        lambda w: w.c.get_account(owner_address=w.d.alice.address),
        lambda w, r: r.account.owner_address == w.d.alice.address and r.storage_units == 5,
    ),
    "get_account_activity": (
        lambda w: w.c.get_account_activity(owner_address=w.d.alice.address),
        lambda w, r: len(r.messages) >= 5,
    ),
    "get_key": (
        lambda w: w.c.get_key(owner_address=w.d.alice.address, key=w.d.alice.key.public_key),
        lambda w, r: r.key.scope == pb.KEY_SCOPE_OWNER,
    ),
    "list_keys": (lambda w: w.c.list_keys(owner_address=w.d.alice.address), lambda w, r: len(r.keys) == 1),
    "list_verifications": (
        lambda w: w.c.list_verifications(owner_address=w.d.alice.address),
        lambda w, r: [v.address for v in r.verifications] == [w.d.verified],
    ),
    "list_links": (
        lambda w: w.c.list_links(owner_address=w.d.alice.address, type=pb.LINK_TYPE_FOLLOW),
        lambda w, r: [link.target_owner_address for link in r.links] == [w.d.bob.address],
    ),
    "list_links_by_target": (
        lambda w: w.c.list_links_by_target(target_project_id=w.d.project_id),
        lambda w, r: [link.owner_address for link in r.links] == [w.d.bob.address],
    ),
    "list_reactions": (
        lambda w: w.c.list_reactions(owner_address=w.d.bob.address),
        lambda w, r: [x.commit_hash for x in r.reactions] == [w.d.commits[2]],
    ),
    "list_reactions_by_target": (
        lambda w: w.c.list_reactions_by_target(project_id=w.d.project_id, commit_hash=w.d.commits[2]),
        lambda w, r: [x.owner_address for x in r.reactions] == [w.d.bob.address],
    ),
    "get_block": (lambda w: w.c.get_block(block_number=1), lambda w, r: r.block.header.number == 1),
    "list_blocks": (lambda w: w.c.list_blocks(page_size=3), lambda w, r: len(r.blocks) == 3),
    "get_message": (
        lambda w: w.c.get_message(hash=w.d.message_hash),
        lambda w, r: r.message.message.data.type == pb.MESSAGE_TYPE_PROJECT_CREATE,
    ),
    "list_messages": (
        lambda w: w.c.list_messages(start_block=1, end_block=0),
        lambda w, r: w.d.message_hash in [m.message.hash for m in r.messages],
    ),
    "get_operation_proof": (
        lambda w: w.c.get_operation_proof(key=statekeys.project_key(w.d.project_id)),
        lambda w, r: isinstance(r, InclusionProof) and r.verify(_proof_root(w, r)),
    ),
    "get_exclusion_proof": (
        lambda w: w.c.get_exclusion_proof(key=statekeys.project_key(bytes(32))),
        lambda w, r: isinstance(r, ExclusionProof) and r.verify(_proof_root(w, r)),
    ),
    "verify_operation_proof": (
        lambda w: w.c.verify_operation_proof(
            proof=w.c.get_operation_proof(key=statekeys.account_key(w.d.alice.address)).proof
        ),
        lambda w, r: r.valid or r.current_root != b"",
    ),
    "get_storage_quota_proof": (
        lambda w: w.c.get_storage_quota_proof(owner_address=w.d.alice.address),
        lambda w, r: (
            isinstance(r, QuotaProof)
            and r.active_units == 5
            and r.verify(bytes(w.c.get_block(block_number=r.proof.block_number).block.header.state_root))
        ),
    ),
    "get_node_status": (lambda w: w.c.get_node_status(), lambda w, r: r.status.network == "devnet"),
    "get_health": (lambda w: w.c.get_health(), lambda w, r: r.live and r.ready),
    "get_chain_stats": (lambda w: w.c.get_chain_stats(), lambda w, r: r.stats.total_projects == 2),
    "get_snapshot_info": (lambda w: w.c.get_snapshot_info(), lambda w, r: r.snapshot.entry_count > 0),
    "get_mempool_info": (lambda w: w.c.get_mempool_info(), lambda w, r: r.mempool.capacity > 0),
    "list_custody_keys": (
        lambda w: w.c.list_custody_keys(owner_address=w.d.alice.address),
        lambda w, r: w.d.custody_key_id in [k.key_id for k in r.custody_keys],
    ),
    "get_custody_key": (
        lambda w: w.c.get_custody_key(owner_address=w.d.alice.address, key_id=w.d.custody_key_id),
        lambda w, r: r.custody_key.key_id == w.d.custody_key_id,
    ),
    "get_web_authn_policy": (lambda w: w.c.get_web_authn_policy(), lambda w, r: bool(r.rp_id)),
}


def test_the_table_covers_every_read_rpc() -> None:
    assert set(CASES) == {r.name for r in reads()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_typed_read(world: World, name: str) -> None:
    call, check = CASES[name]
    answer = call(world)
    assert check(world, answer), (name, answer)


# iter_* name -> (its keyword arguments, how many items the data holds at least)
ITERS: dict[str, Callable[[ChainData], tuple[dict[str, Any], int]]] = {
    "iter_search_projects": lambda d: ({"name_prefix": "hello"}, 2),
    "iter_projects": lambda d: ({}, 2),
    "iter_project_activity": lambda d: ({"project_id": d.project_id}, 5),
    "iter_merge_requests": lambda d: ({"project_id": d.project_id}, 1),
    "iter_merge_requests_by_requester": lambda d: ({"owner_address": d.bob.address}, 1),
    "iter_refs": lambda d: ({"project_id": d.project_id}, 2),
    "iter_ref_log": lambda d: ({"project_id": d.project_id, "ref_name": MAIN}, 2),
    "iter_commits": lambda d: ({"project_id": d.project_id}, 3),
    "iter_commit_ancestors": lambda d: ({"project_id": d.project_id, "commit_hash": d.commits[2]}, 2),
    "iter_collaborators": lambda d: ({"project_id": d.project_id}, 1),
    "iter_account_activity": lambda d: ({"owner_address": d.alice.address}, 5),
    "iter_keys": lambda d: ({"owner_address": d.alice.address}, 1),
    "iter_custody_keys": lambda d: ({"owner_address": d.alice.address}, 1),
    "iter_verifications": lambda d: ({"owner_address": d.alice.address}, 1),
    "iter_links": lambda d: ({"owner_address": d.alice.address}, 1),
    "iter_links_by_target": lambda d: ({"target_project_id": d.project_id}, 1),
    "iter_reactions": lambda d: ({"owner_address": d.bob.address}, 1),
    "iter_reactions_by_target": lambda d: ({"project_id": d.project_id, "commit_hash": d.commits[2]}, 1),
    "iter_blocks": lambda d: ({}, 10),
    "iter_messages": lambda d: ({"start_block": 1}, 15),
}


def test_the_iterator_table_covers_every_paginated_read() -> None:
    assert set(ITERS) == {iter_name(r.rpc) for r in reads() if r.paginated()}


@pytest.mark.parametrize("name", sorted(ITERS))
def test_iterator_follows_pages_of_one(world: World, name: str) -> None:
    """Pages of one item give every item once, in the order one big page gives them."""
    kwargs, at_least = ITERS[name](world.d)
    one_by_one = [item.SerializeToString() for item in getattr(world.c, name)(page_size=1, **kwargs)]
    whole = [item.SerializeToString() for item in getattr(world.c, name)(page_size=200, **kwargs)]
    assert len(one_by_one) >= at_least
    if name not in ("iter_blocks", "iter_messages"):  # the chain grows between the two walks
        assert one_by_one == whole
    else:
        assert len(set(one_by_one)) == len(one_by_one)


def test_a_page_token_reaches_the_next_page(world: World) -> None:
    first = world.c.list_commits(project_id=world.d.project_id, page_size=2)
    assert len(first.commits) == 2 and first.next_page_token
    rest = world.c.list_commits(project_id=world.d.project_id, page_size=2, page_token=first.next_page_token)
    assert [c.hash for c in rest.commits] == [world.d.commits[0]] and rest.next_page_token == ""


def test_verify_operation_proof_sees_a_forged_value(world: World) -> None:
    proof = proof_pb2.MerkleProof()
    proof.CopyFrom(world.c.get_operation_proof(key=statekeys.account_key(world.d.alice.address)).proof)
    proof.value = b"forged"
    assert not world.c.verify_operation_proof(proof=proof).valid


def test_reads_keep_the_raw_stub(world: World) -> None:
    """Code written against `client.stub` keeps working beside the typed reads."""
    resp = world.c.stub.GetProject(rpc_pb2.GetProjectRequest(project_id=world.d.project_id))
    assert resp == world.c.get_project(project_id=world.d.project_id)
