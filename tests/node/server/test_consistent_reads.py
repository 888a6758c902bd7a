"""Consistent reads on one node (docs/replication.md, "Read consistency"): every read names the height it was
read at (`chain-height`, on gRPC and gRPC-web), `chain-min-height` waits for a block's commit or refuses at
the deadline (HEIGHT_NOT_REACHED), bad values are INVALID_ARGUMENT, and a solo node answers a linearizable
read at once. With a read worker the calls a worker cannot answer from its own snapshot go to the main
process, which waits: each call opens its own channel so the kernel spreads them over both processes."""

from __future__ import annotations

import struct
import threading
import urllib.request
from collections.abc import Iterator

import grpc
import pytest

from chain.v1 import keychain_service_pb2_grpc, rpc_pb2, service_pb2_grpc
from node.errors import CHAIN_HEIGHT, FIELD, RETRY_AFTER_MS, trailer
from node.sdk.rpc import reason_of
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess

CHANNELS = 6  # fresh channels per check: with a read worker, the kernel hands some to each process


@pytest.fixture(scope="module", params=[0, 1], ids=["main-only", "read-worker"])
def solo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    workers = str(request.param)
    node = NodeProcess(tmp_path_factory.mktemp("solo") / "data", "--read-workers", workers).start(timeout=120)
    yield node
    node.stop()


def _stubs(node: NodeProcess) -> Iterator[service_pb2_grpc.ChainServiceStub]:
    for _ in range(CHANNELS):
        with grpc.insecure_channel(node.grpc_target) as channel:
            yield service_pb2_grpc.ChainServiceStub(channel)


def _height(node: NodeProcess) -> int:
    with node.client(timeout=10) as c:
        return int(c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=10).status.block_height)


def test_every_read_names_the_height_it_was_read_at(solo: NodeProcess) -> None:
    for stub in _stubs(solo):
        before = _height(solo)
        _, call = stub.GetChainStats.with_call(rpc_pb2.GetChainStatsRequest(), timeout=10)
        height = int(trailer(call.trailing_metadata(), CHAIN_HEIGHT) or -1)
        assert before <= height <= _height(solo)
        _, call = stub.GetBlock.with_call(rpc_pb2.GetBlockRequest(block_number=0), timeout=10)
        assert int(trailer(call.trailing_metadata(), CHAIN_HEIGHT) or -1) >= before
    with grpc.insecure_channel(solo.grpc_target) as channel:
        keychain = keychain_service_pb2_grpc.KeychainServiceStub(channel)
        request = rpc_pb2.ListCustodyKeysRequest(owner_address=solo.authority().wallet.address)
        _, call = keychain.ListCustodyKeys.with_call(request, timeout=10)
        assert trailer(call.trailing_metadata(), CHAIN_HEIGHT) is not None


def _grpc_web(node: NodeProcess, headers: dict[str, str] | None = None) -> dict[str, str]:
    """GetChainStats over the node's gRPC-web listener: the answer's trailers (and headers, for a
    trailers-only answer)."""
    body = rpc_pb2.GetChainStatsRequest().SerializeToString()
    request = urllib.request.Request(
        f"{node.web_url}/chain.v1.ChainService/GetChainStats",
        data=struct.pack(">BI", 0, len(body)) + body,
        headers={"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        raw = answer.read()
        trailers = {k.lower(): v for k, v in answer.headers.items()}
    while raw:
        flag, length = struct.unpack(">BI", raw[:5])
        if flag & 0x80:
            for line in raw[5 : 5 + length].decode().split("\r\n"):
                if line:
                    name, _, value = line.partition(":")
                    trailers[name.strip().lower()] = value.strip()
        raw = raw[5 + length :]
    return trailers


def test_grpc_web_reads_name_their_height_and_take_the_wishes(solo: NodeProcess) -> None:
    trailers = _grpc_web(solo)
    assert trailers["grpc-status"] == "0"
    assert int(trailers[CHAIN_HEIGHT]) >= 0
    wanted = str(_height(solo) + 10_000)
    trailers = _grpc_web(solo, {"Chain-Min-Height": wanted, "Grpc-Timeout": "2S"})
    assert (trailers["grpc-status"], trailers["reason-code"]) == ("14", "HEIGHT_NOT_REACHED"), trailers
    trailers = _grpc_web(solo, {"Chain-Read-Consistency": "linearizable"})
    assert trailers["grpc-status"] == "0" and int(trailers[CHAIN_HEIGHT]) >= 0


def test_a_height_not_reached_by_the_deadline_is_refused(solo: NodeProcess) -> None:
    wanted = _height(solo) + 10_000
    for stub in _stubs(solo):
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetChainStats(
                rpc_pb2.GetChainStatsRequest(), timeout=2.0, metadata=(("chain-min-height", str(wanted)),)
            )
        err = refused.value
        assert err.code() == grpc.StatusCode.UNAVAILABLE, err.details()
        assert reason_of(err) == "HEIGHT_NOT_REACHED"
        assert trailer(err.trailing_metadata(), RETRY_AFTER_MS) is not None
        assert str(wanted) in (err.details() or "")


def test_a_read_at_the_next_height_waits_for_its_commit(solo: NodeProcess) -> None:
    with solo.client(timeout=30) as c:
        actor = new_account(c, solo.authority())
        for stub in _stubs(solo):
            wanted = _height(solo) + 1
            got: list[int] = []

            def read(
                stub: service_pb2_grpc.ChainServiceStub = stub, wanted: int = wanted, got: list[int] = got
            ) -> None:
                md = (("chain-min-height", str(wanted)),)
                _, call = stub.GetAccount.with_call(
                    rpc_pb2.GetAccountRequest(owner_address=actor.address), timeout=30, metadata=md
                )
                got.append(int(trailer(call.trailing_metadata(), CHAIN_HEIGHT) or -1))

            waiting = threading.Thread(target=read)
            waiting.start()
            c.commit(actor.b.follow(bytes([wanted % 256]) * 20))  # the next block
            waiting.join(30)
            assert got and got[0] >= wanted


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("chain-min-height", "abc"),
        ("chain-min-height", "-1"),
        ("chain-min-height", "1.5"),
        ("chain-min-height", "+3"),
        ("chain-read-consistency", "strong"),
    ],
)
def test_a_value_it_cannot_take_is_invalid_argument(solo: NodeProcess, name: str, value: str) -> None:
    for stub in _stubs(solo):
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetChainStats(rpc_pb2.GetChainStatsRequest(), timeout=10, metadata=((name, value),))
        err = refused.value
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert reason_of(err) == "INVALID_ARGUMENT"
        assert trailer(err.trailing_metadata(), FIELD) == name


def test_a_solo_node_answers_a_linearizable_read_at_once(solo: NodeProcess) -> None:
    for stub in _stubs(solo):
        before = _height(solo)
        md = (("chain-read-consistency", "linearizable"),)
        _, call = stub.GetChainStats.with_call(rpc_pb2.GetChainStatsRequest(), timeout=5, metadata=md)
        assert int(trailer(call.trailing_metadata(), CHAIN_HEIGHT) or -1) >= before
        md = (("chain-read-consistency", "serializable"),)
        _, call = stub.GetChainStats.with_call(rpc_pb2.GetChainStatsRequest(), timeout=5, metadata=md)
        assert int(trailer(call.trailing_metadata(), CHAIN_HEIGHT) or -1) >= before


def test_a_failed_read_keeps_its_reason_trailers(solo: NodeProcess) -> None:
    """A refusal carries its reason trailers (the height trailer of a successful answer never hides them)."""
    with grpc.insecure_channel(solo.grpc_target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        with pytest.raises(grpc.RpcError) as missing:
            stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=10**9), timeout=10)
    assert reason_of(missing.value) == "NOT_FOUND"
