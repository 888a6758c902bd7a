"""One exception hierarchy: every failure of ChainClient is a ChainError of its reason's family, with the
node's reason code, its retry hint and details, from every kind of call (submit, batch results, commit,
reads, streams, a TLS handshake); code written for raw gRPC errors (`except grpc.RpcError`, `err.code()`,
`reason_of`) keeps working."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from chain.v1 import message_pb2 as pb
from node.errors import CliCode, Reason
from node.sdk import errors as E
from node.sdk.calls import error_of
from node.sdk.rpc import ChainClient, reason_of, retry_after
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.certs import TestCA
from tests.fixtures.nodeproc import NodeProcess
from tests.node.sdk.chaindata import commit_meta


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    proc = NodeProcess(tmp_path_factory.mktemp("errors") / "data").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def client(node: NodeProcess) -> Iterator[ChainClient]:
    with node.client() as c:
        yield c


@pytest.fixture(scope="module")
def funded(node: NodeProcess, client: ChainClient) -> RemoteActor:
    return new_account(client, node.authority(), units=1)


def test_every_node_reason_has_a_family_that_agrees_with_its_grpc_status() -> None:
    """The SDK's table is total over the node's reasons, and each family is the one of the reason's status."""
    from node.server.rpc.status import REASON_STATUS  # noqa: PLC0415 - the node's table, for the comparison

    families = {
        grpc.StatusCode.INVALID_ARGUMENT: (E.InvalidMessage, E.InvalidArgument),
        grpc.StatusCode.RESOURCE_EXHAUSTED: (E.ResourceExhausted,),
        grpc.StatusCode.ALREADY_EXISTS: (E.Duplicate,),
        grpc.StatusCode.PERMISSION_DENIED: (E.Unauthorized,),
        grpc.StatusCode.FAILED_PRECONDITION: (E.StateConflict,),
        grpc.StatusCode.UNAVAILABLE: (E.Unavailable,),
        grpc.StatusCode.NOT_FOUND: (E.NotFound,),
        grpc.StatusCode.INTERNAL: (E.InternalError,),
        grpc.StatusCode.DATA_LOSS: (E.InternalError,),
        grpc.StatusCode.DEADLINE_EXCEEDED: (E.DeadlineExceeded,),
    }
    for reason in Reason:
        assert reason in E.REASON_FAMILY, reason
        expected = families.get(REASON_STATUS[reason], (E.ChainError,))
        assert issubclass(E.REASON_FAMILY[reason], expected), reason


def test_a_chain_error_is_a_grpc_error() -> None:
    err = E.family_of(Reason.NOT_LEADER)(Reason.NOT_LEADER, "no leader", retry_after=1.0)
    assert isinstance(err, grpc.RpcError) and isinstance(err, grpc.Call)
    assert err.code() == grpc.StatusCode.UNAVAILABLE and err.details() == "no leader"
    assert reason_of(err) == "NOT_LEADER" and retry_after(err) == 1.0 and err.retryable
    assert str(err) == "NOT_LEADER: no leader"


def _signature_broken(msg: pb.Message) -> pb.Message:
    broken = pb.Message()
    broken.CopyFrom(msg)
    broken.signature = bytes(64)
    return broken


def test_invalid_message_on_submit(client: ChainClient, funded: RemoteActor) -> None:
    with pytest.raises(E.InvalidMessage) as info:
        client.submit(_signature_broken(funded.b.follow(os.urandom(20))))
    assert isinstance(info.value, E.Rejected)
    assert info.value.reason == Reason.INVALID_SIGNATURE and info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_text_names_the_reason_once_then_the_nodes_detail(client: ChainClient, funded: RemoteActor) -> None:
    with pytest.raises(E.InvalidMessage) as refused:  # the node's own text starts with its code
        client.submit(_signature_broken(funded.b.follow(os.urandom(20))))
    err = refused.value
    assert err.detail.startswith("INVALID_SIGNATURE: ")  # the node's text, as it sent it
    assert str(err) == err.detail and str(err).count("INVALID_SIGNATURE") == 1, str(err)
    with pytest.raises(E.Unauthorized) as stranger:
        client.commit(RemoteActor().b.follow(os.urandom(20)))
    assert str(stranger.value).startswith("UNKNOWN_SIGNER: ") and str(stranger.value).count("UNKNOWN_SIGNER") == 1
    assert str(E.NotFound(Reason.NOT_FOUND, "no such project")) == "NOT_FOUND: no such project"
    assert str(E.Unavailable(Reason.NOT_LEADER, "NOT_LEADER")) == "NOT_LEADER"


def test_unauthorized_on_commit(client: ChainClient) -> None:
    stranger = RemoteActor()  # no signer registered
    with pytest.raises(E.Unauthorized) as info:
        client.commit(stranger.b.follow(os.urandom(20)))
    assert info.value.reason == Reason.UNKNOWN_SIGNER


def test_state_conflict_in_a_batch_result_and_on_commit(client: ChainClient, funded: RemoteActor) -> None:
    msg = funded.b.commit_bundle(os.urandom(32), [commit_meta(1)])
    (result,) = client.batch([msg])
    err = error_of(result)
    assert isinstance(err, E.StateConflict) and err.reason == Reason.PROJECT_NOT_FOUND
    with pytest.raises(E.StateConflict) as info:
        client.commit(msg)
    assert info.value.reason == Reason.PROJECT_NOT_FOUND and info.value.values["index"] == 0


def test_duplicate(client: ChainClient, funded: RemoteActor) -> None:
    first = funded.b.project_create("taken")
    client.commit(first)
    with pytest.raises(E.Duplicate) as info:  # another message (an earlier timestamp), the same name
        client.commit(funded.b.project_create("taken", timestamp=first.data.timestamp - 1))
    assert info.value.reason == Reason.NAME_TAKEN


def test_limit_exceeded_is_a_rejection_and_a_resource_limit(node: NodeProcess, client: ChainClient) -> None:
    poor = RemoteActor()
    client.commit(poor.b.signer_add(poor.wallet, 0))  # an account without storage units
    with pytest.raises(E.LimitExceeded) as info:
        client.commit(poor.b.project_create("nothing"))
    assert isinstance(info.value, E.Rejected) and isinstance(info.value, E.ResourceExhausted)
    assert info.value.reason in (Reason.NO_STORAGE, Reason.QUOTA_EXCEEDED)


def test_resource_exhausted_on_a_batch(client: ChainClient, funded: RemoteActor) -> None:
    with pytest.raises(E.ResourceExhausted) as info:
        client.batch([funded.b.follow(os.urandom(20)) for _ in range(101)])
    assert info.value.reason == Reason.BATCH_TOO_LARGE and not isinstance(info.value, E.Rejected)


def test_dry_run_reports_without_raising(client: ChainClient, funded: RemoteActor) -> None:
    verdict = client.dry_run(funded.b.commit_bundle(os.urandom(32), [commit_meta(2)]))
    assert isinstance(error_of(verdict), E.StateConflict)
    assert error_of(client.dry_run(funded.b.follow(os.urandom(20)))) is None


def test_not_found_and_invalid_argument_on_reads(client: ChainClient) -> None:
    with pytest.raises(E.NotFound) as missing:
        client.get_project(project_id=os.urandom(32))
    assert missing.value.reason == Reason.NOT_FOUND
    with pytest.raises(E.InvalidArgument) as bad:
        client.get_project(project_id=b"short")
    assert bad.value.reason == Reason.INVALID_ARGUMENT and bad.value.field == "project_id"


def test_invalid_argument_on_a_paginated_iterator(client: ChainClient) -> None:
    with pytest.raises(E.InvalidArgument):
        list(client.iter_commits(project_id=b"short"))


def test_unavailable_when_nothing_listens() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with ChainClient(f"127.0.0.1:{port}", timeout=5) as c:
            with pytest.raises(E.Unavailable) as info:
                c.get_health()
            assert info.value.retryable and info.value.reason == "UNAVAILABLE"
            with pytest.raises(E.Unavailable):
                next(iter(c.subscribe_blocks(resume=False, from_block=1)))


def test_deadline_exceeded_is_a_timeout(client: ChainClient) -> None:
    with pytest.raises(TimeoutError) as info:
        client.wait_committed(os.urandom(32), timeout=0.2)
    assert isinstance(info.value, E.DeadlineExceeded) and info.value.reason == CliCode.TIMEOUT


def test_tls_error_names_the_target_and_the_ca(tmp_path: Path, node: NodeProcess) -> None:
    """A TLS client on the plaintext node: the handshake fails, as a TLSError (not retryable)."""
    other = TestCA.make(tmp_path / "other")
    with ChainClient(f"grpcs://{node.grpc_target}", ca_file=other.cert, timeout=5) as c:
        with pytest.raises(E.TLSError) as info:
            c.get_health()
        with pytest.raises(E.TLSError):
            next(iter(c.subscribe_blocks()))
    assert info.value.reason == CliCode.TLS_FAILED and not info.value.retryable
    assert f"grpcs://{node.grpc_target}" in str(info.value)
