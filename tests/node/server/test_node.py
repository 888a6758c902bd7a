"""chain-node over real sockets: the newcomer flow, pagination, bad input, snapshots."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node.sdk.messages import sign_message
from node.sdk.proofs import verify_operation_proof, verify_storage_quota_proof
from node.sdk.rpc import reason_of
from node.storage import schema
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import READ_WORKERS, NodeProcess
from tests.harness import commit_meta

pytestmark = READ_WORKERS


def test_newcomer_flow_reads_back_through_every_rpc(node: NodeProcess):
    c = node.client()
    alice = new_account(c, node.authority())
    pid = c.commit(alice.b.project_create("hello", "first project"))[0].message.hash
    base = commit_meta(1)
    feature = commit_meta(2, base.hash)
    main2 = commit_meta(3, base.hash)
    merge = commit_meta(4, main2.hash, feature.hash)
    c.commit(alice.b.commit_bundle(pid, [base, feature, main2, merge]))
    c.commit(
        alice.b.ref_update(pid, b"refs/heads/main", main2.hash, 1),
        alice.b.ref_update(pid, b"refs/heads/feature", feature.hash, 1),
    )
    c.commit(alice.b.ref_update(pid, b"refs/heads/main", merge.hash, 2, old_hash=main2.hash))

    s = c.stub
    project = s.GetProject(rpc_pb2.GetProjectRequest(project_id=pid)).project
    assert (project.name, project.owner_address, project.commit_count, project.ref_count) == (
        "hello",
        alice.address,
        4,
        2,
    )
    by_name = s.GetProjectByName(rpc_pb2.GetProjectByNameRequest(owner_address=alice.address, name="hello"))
    assert by_name.project.project_id == pid
    assert [p.project_id for p in s.SearchProjects(rpc_pb2.SearchProjectsRequest(name_prefix="hel")).projects] == [pid]
    refs = s.ListRefs(rpc_pb2.ListRefsRequest(project_id=pid)).refs
    assert {(r.name, r.hash) for r in refs} == {(b"refs/heads/main", merge.hash), (b"refs/heads/feature", feature.hash)}
    assert s.GetRef(rpc_pb2.GetRefRequest(project_id=pid, ref_name=b"refs/heads/main")).ref.nonce == 2
    log = s.GetRefLog(rpc_pb2.GetRefLogRequest(project_id=pid, ref_name=b"refs/heads/main")).entries
    assert [(e.old_hash, e.new_hash) for e in log] == [(main2.hash, merge.hash), (b"", main2.hash)]
    assert all(e.owner_address == alice.address for e in log)
    commits = s.ListCommits(rpc_pb2.ListCommitsRequest(project_id=pid)).commits
    assert [x.hash for x in commits] == [merge.hash, main2.hash, feature.hash, base.hash]
    got = s.GetCommit(rpc_pb2.GetCommitRequest(project_id=pid, commit_hash=merge.hash)).commit
    assert got.author_address == alice.address
    assert list(got.parents) == [main2.hash, feature.hash]
    ancestors = s.GetCommitAncestors(rpc_pb2.GetCommitAncestorsRequest(project_id=pid, commit_hash=merge.hash))
    assert [x.hash for x in ancestors.commits] == [main2.hash, feature.hash, base.hash]
    activity = s.GetProjectActivity(rpc_pb2.GetProjectActivityRequest(project_id=pid)).messages
    assert [m.message.data.type for m in activity][-1] == pb.MESSAGE_TYPE_PROJECT_CREATE
    account = s.GetAccount(rpc_pb2.GetAccountRequest(owner_address=alice.address))
    assert account.account.project_count == 1
    assert account.storage_units == 1
    assert [k.key for k in account.keys] == [alice.key.public_key]
    acts = s.GetAccountActivity(rpc_pb2.GetAccountActivityRequest(owner_address=alice.address)).messages
    assert len(acts) == 6  # signer add, create, bundle, 2 + 1 ref updates
    for key in (schema.signer_key(alice.address, alice.key.public_key), schema.account_key(alice.address)):
        proof = s.GetOperationProof(rpc_pb2.GetOperationProofRequest(key=key))
        assert verify_operation_proof(proof.proof, proof.state_root)
    quota = s.GetStorageQuotaProof(rpc_pb2.GetStorageQuotaProofRequest(owner_address=alice.address)).proof
    assert verify_storage_quota_proof(quota, quota.state_root) == 1
    status = s.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status
    assert (status.network, status.role) == ("devnet", "solo")
    assert status.block_height >= 5
    stats = s.GetChainStats(rpc_pb2.GetChainStatsRequest()).stats
    assert stats.total_projects == 1
    assert stats.total_accounts >= 2
    assert s.GetHealth(rpc_pb2.GetHealthRequest()).ready


def test_pagination_over_rpc(node: NodeProcess):
    c = node.client()
    alice = new_account(c, node.authority())
    pid = c.commit(alice.b.project_create("big"))[0].message.hash
    commits = [commit_meta(i) for i in range(450)]
    c.commit(alice.b.commit_bundle(pid, commits))
    seen: list[bytes] = []
    sizes: list[int] = []
    token = ""
    while True:
        resp = c.stub.ListCommits(rpc_pb2.ListCommitsRequest(project_id=pid, page_size=1000, page_token=token))
        sizes.append(len(resp.commits))
        seen.extend(x.hash for x in resp.commits)
        token = resp.next_page_token
        if not token:
            break
    assert sizes == [200, 200, 50]
    assert sorted(seen) == sorted(x.hash for x in commits)


def _rejected(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    return exc.value.code(), reason_of(exc.value)


def test_bad_input_gets_reason_codes_and_the_node_keeps_serving(node: NodeProcess):
    c = node.client()
    alice = new_account(c, node.authority())
    s = c.stub
    raw = c.channel.unary_unary(
        "/chain.v1.ChainService/SubmitMessage", request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    got = _rejected(lambda: raw(b"\xff\xff\xff\x00garbage", timeout=10))
    assert got == (grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_MESSAGE")

    good = alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "hi")
    wrong_hash = pb.Message()
    wrong_hash.CopyFrom(good)
    wrong_hash.hash = b"\x00" * 32
    bad_sig = pb.Message()
    bad_sig.CopyFrom(good)
    bad_sig.signature = bytes(64)

    def resign(**changes):
        data = pb.MessageData()
        data.CopyFrom(good.data)
        for k, v in changes.items():
            setattr(data, k, v)
        return sign_message(data, alice.key)

    cases = [
        (wrong_hash, grpc.StatusCode.INVALID_ARGUMENT, "HASH_MISMATCH"),
        (bad_sig, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SIGNATURE"),
        (resign(network=pb.NETWORK_MAINNET), grpc.StatusCode.INVALID_ARGUMENT, "WRONG_NETWORK"),
        (resign(timestamp=good.data.timestamp + 3600), grpc.StatusCode.INVALID_ARGUMENT, "FUTURE_TIMESTAMP"),
        (resign(type=12), grpc.StatusCode.INVALID_ARGUMENT, "DISABLED_MESSAGE_TYPE"),
        (
            alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "x" * 300_000),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "MESSAGE_TOO_LARGE",
        ),
    ]
    for msg, code, reason in cases:
        got = _rejected(lambda m=msg: s.SubmitMessage(rpc_pb2.SubmitMessageRequest(message=m), timeout=10))
        assert got == (code, reason), reason
        dry = s.DryRunMessage(rpc_pb2.DryRunMessageRequest(message=msg))
        assert (dry.valid, dry.reason_code) == (False, reason)
    too_many = [alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"b{i}") for i in range(101)]
    got = _rejected(lambda: s.BatchSubmitMessages(rpc_pb2.BatchSubmitMessagesRequest(messages=too_many)))
    assert got == (grpc.StatusCode.RESOURCE_EXHAUSTED, "BATCH_TOO_LARGE")
    # a batch with a bad message in it: per-message results, the good ones go through
    results = c.batch([good, bad_sig, alice.b.account_data(pb.ACCOUNT_FIELD_WEBSITE, "https://x.test")])
    assert [(r.index, r.accepted, r.reason_code) for r in results] == [
        (0, True, ""),
        (1, False, "INVALID_SIGNATURE"),
        (2, True, ""),
    ]
    got = _rejected(lambda: s.SubmitMessage(rpc_pb2.SubmitMessageRequest(message=good)))
    assert got[1] == "DUPLICATE_MESSAGE"
    c.wait_committed(results[2].hash)
    assert s.GetAccount(rpc_pb2.GetAccountRequest(owner_address=alice.address)).account.bio == "hi"
    got = _rejected(lambda: s.GetAccount(rpc_pb2.GetAccountRequest(owner_address=b"\x01")))
    assert got == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    got = _rejected(lambda: s.GetProject(rpc_pb2.GetProjectRequest(project_id=b"\x01" * 32)))
    assert got == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    assert s.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height > 0


def test_mempool_info_and_dry_run_change_nothing(node: NodeProcess):
    c = node.client()
    alice = new_account(c, node.authority())
    msg = alice.b.project_create("dry")
    dry = c.stub.DryRunMessage(rpc_pb2.DryRunMessageRequest(message=msg))
    assert dry.valid and dry.hash == msg.hash
    assert c.stub.GetMempoolInfo(rpc_pb2.GetMempoolInfoRequest()).mempool.capacity == 100_000
    c.commit(msg)  # the dry run left no trace: the real one is accepted
    again = c.stub.DryRunMessage(rpc_pb2.DryRunMessageRequest(message=msg))
    assert (again.valid, again.reason_code) == (False, "DUPLICATE_MESSAGE")


def test_reflection_lists_every_rpc(node: NodeProcess):
    c = node.client()
    stub = reflection_pb2_grpc.ServerReflectionStub(c.channel)
    responses = list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
    services = {s.name for s in responses[0].list_services_response.service}
    assert {"chain.v1.ChainService", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= services
    req = reflection_pb2.ServerReflectionRequest(file_containing_symbol="chain.v1.ChainService")
    resp = next(iter(stub.ServerReflectionInfo(iter([req]))))
    names = set()
    for raw in resp.file_descriptor_response.file_descriptor_proto:
        fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
        for svc in fd.service:
            if svc.name == "ChainService":
                names = {m.name for m in svc.method}
    assert len(names) == 42
