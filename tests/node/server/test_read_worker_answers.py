"""A read worker answers exactly as the main process does (the worker wraps its own reads once at start-up,
node/server/readers/served.py, where the main process runs its interceptors per call).

One store, read over real sockets twice: through the read workers of `--read-workers 2` (the main process
takes no public connection then, so every call is a worker's), then through the main process alone
(`--read-workers 0`, the node restarted on the same store). Successful answers must be the same bytes;
failures the same status, message and trailers (reason code, field). A read through a worker right after a
commit sees that commit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from chain.v1 import rpc_pb2, service_pb2_grpc
from node.errors import REASON_CODE, trailer
from node.memo import ENTRY_OVERHEAD
from node.server.readers.answers import AnswerMemo
from node.storage import schema
from tests.fixtures.actors import authority_builder, new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import wait_until
from tests.fixtures.scrape import read_worker_answers, read_worker_calls

SERVICE = "/chain.v1.ChainService"
Outcome = tuple[str, bytes, tuple[tuple[str, Any], ...]]


def _calls(address: bytes, project_id: bytes) -> list[tuple[str, bytes]]:
    """(method, request bytes): answers, typed failures and a body that does not decode."""
    return [
        ("GetAccount", rpc_pb2.GetAccountRequest(owner_address=address).SerializeToString()),
        ("GetAccount", rpc_pb2.GetAccountRequest(owner_address=b"\x01" * 20).SerializeToString()),
        ("GetAccount", rpc_pb2.GetAccountRequest(owner_address=b"short").SerializeToString()),
        ("GetProject", rpc_pb2.GetProjectRequest(project_id=project_id).SerializeToString()),
        ("GetProject", rpc_pb2.GetProjectRequest(project_id=b"\x02" * 32).SerializeToString()),
        ("GetOperationProof", rpc_pb2.GetOperationProofRequest(key=schema.account_key(address)).SerializeToString()),
        ("GetOperationProof", rpc_pb2.GetOperationProofRequest(key=b"not a state key").SerializeToString()),
        (
            "GetOperationProof",
            rpc_pb2.GetOperationProofRequest(key=schema.account_key(b"\x03" * 20)).SerializeToString(),
        ),
        (
            "GetExclusionProof",
            rpc_pb2.GetExclusionProofRequest(key=schema.account_key(b"\x03" * 20)).SerializeToString(),
        ),
        ("GetBlock", rpc_pb2.GetBlockRequest(block_number=1).SerializeToString()),
        ("GetChainStats", rpc_pb2.GetChainStatsRequest().SerializeToString()),
        ("GetAccount", b"\xff\xff\xff"),
    ]


def _outcome(channel: grpc.Channel, method: str, request: bytes) -> Outcome:
    call: Callable[..., Any] = channel.unary_unary(f"{SERVICE}/{method}", None, None)
    try:
        return ("OK", call(request, timeout=20), ())
    except grpc.RpcError as err:
        status: Any = err
        trailers = tuple((k, v) for k, v in status.trailing_metadata() or () if k in (REASON_CODE, "field"))
        return (f"{status.code().name}: {status.details()}", b"", trailers)


def _answers(node: NodeProcess, calls: list[tuple[str, bytes]]) -> list[Outcome]:
    with grpc.insecure_channel(node.grpc_target) as channel:
        return [_outcome(channel, method, request) for method, request in calls]


def test_worker_answers_are_the_main_process_answers_byte_for_byte(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", "--read-workers", "2").start(timeout=120)
    try:
        client = node.client()
        alice = new_account(client, node.authority())
        project_id = client.commit(alice.b.project_create("answers", "read twice"))[0].message.hash
        calls = _calls(alice.address, project_id)
        by_workers = _answers(node, calls)
    finally:
        node.stop()
    node = NodeProcess(tmp_path / "data", "--read-workers", "0").start(timeout=120)
    try:
        by_main = _answers(node, calls)
    finally:
        node.stop()
    assert [o[0] for o in by_workers][:2] == ["OK", "OK"]
    assert by_workers == by_main
    reasons = [trailer(o[2], REASON_CODE) for o in by_workers]
    assert reasons[2] is not None and reasons[4] == "NOT_FOUND" and reasons[-1] == "MALFORMED_MESSAGE"


def test_a_read_through_a_worker_sees_the_commit_before_it(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", "--read-workers", "2").start(timeout=120)
    try:
        client = node.client()
        alice = new_account(client, node.authority())
        with grpc.insecure_channel(node.grpc_target) as channel:
            stub = service_pb2_grpc.ChainServiceStub(channel)
            for n in range(3):
                project_id = client.commit(alice.b.project_create(f"seen-{n}", "read after commit"))[0].message.hash
                got = stub.GetProject(rpc_pb2.GetProjectRequest(project_id=project_id), timeout=20)
                assert got.project.name == f"seen-{n}"
                height = stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=20).status.block_height
                proof = stub.GetOperationProof(
                    rpc_pb2.GetOperationProofRequest(key=schema.account_key(alice.address)), timeout=20
                )
                assert proof.block_number >= height  # the worker's head is the newest committed one
    finally:
        node.stop()


@pytest.mark.parametrize("kept", [["--read-answer-bytes", "8388608"], ["--read-answer-bytes", "0"]])
def test_a_remembered_answer_is_given_only_on_the_store_it_was_read_from(tmp_path: Path, kept: list[str]) -> None:
    """A worker keeps its answers by snapshot of the store (node/server/readers/answers.py): the same call
    again is the same bytes, and after a commit that changes the account the next call says so; with
    `--read-answer-bytes 0` nothing is kept and the answers are the same."""
    node = NodeProcess(tmp_path / "data", "--read-workers", "1", *kept).start(timeout=120)
    try:
        client = node.client()
        alice = new_account(client, node.authority(), units=1)
        request = rpc_pb2.GetAccountRequest(owner_address=alice.address)
        with grpc.insecure_channel(node.grpc_target) as channel:
            stub = service_pb2_grpc.ChainServiceStub(channel)
            first = stub.GetAccount(request, timeout=20)
            assert stub.GetAccount(request, timeout=20) == first and first.storage_units == 1
            client.commit(authority_builder(node.authority()).storage_grant(alice.address, 2))
            assert stub.GetAccount(request, timeout=20).storage_units == 3
        # the worker's lines carry its totals (about once a second): the repeat was a hit, the first call and
        # the one after the commit misses (other reads, the client's, may add to either)
        port = node.ready["metrics_port"]
        if kept[1] == "0":
            assert wait_until(lambda: read_worker_calls(port).get("0", 0) >= 3, timeout=20)
            assert read_worker_answers(port) == (0, 0, 0)
        else:
            assert wait_until(lambda: _seen(*read_worker_answers(port)), timeout=20), read_worker_answers(port)
    finally:
        node.stop()


def _seen(hits: float, misses: float, size: float) -> bool:
    return hits >= 1 and misses >= 2 and size > 0


def test_an_answer_is_given_only_for_its_snapshot() -> None:
    memo = AnswerMemo(64 * 1024)  # entries up to 1 KiB (the bound's rules: tests/node/test_memo.py)
    answer = bytes(300)
    memo.keep("/m", b"req", 7, answer)
    assert memo.size == 3 + 300 + ENTRY_OVERHEAD  # an entry costs its request and its answer
    assert memo.answer("/m", b"req", 7) == answer
    assert memo.answer("/m", b"req", 8) is None  # another snapshot: not given
    assert memo.answer("/n", b"req", 7) is None  # another method's call with the same bytes
    memo.keep("/m", b"req", 8, answer)  # answered again on a newer snapshot: replaced, counted once
    assert memo.size == 3 + 300 + ENTRY_OVERHEAD and memo.answer("/m", b"req", 8) == answer
    assert memo.answer("/m", b"req", 7) is None
