"""The node's two surfaces over real sockets: what the public port serves and refuses, what the internal
listener requires, TLS on every listener, certificates renewed on disk, and the cap on open streams."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from chain.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    rpc_pb2,
    service_pb2_grpc,
    snapshot_sync_pb2,
    snapshot_sync_service_pb2_grpc,
)
from chain.v1 import message_pb2 as pb
from node.errors import REASON_CODE, RETRY_AFTER_MS, Reason, trailer
from node.server.config import parse_config
from node.server.transport import plaintext_line
from node.server.write.membership import MemberProof
from node.tls import ClientTLS, sync_channel
from tests.fixtures.actors import RemoteActor
from tests.fixtures.certs import TestCA
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles
from tests.fixtures.procs import wait_until

SECRET = b"members-only-secret-0123456789"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA.make(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory, ca: TestCA) -> Iterator[NodeProcess]:
    root = tmp_path_factory.mktemp("tls-node")
    node = NodeProcess(
        root / "data",
        "--cluster-secret",
        SECRET.decode(),
        "--max-streams",
        "3",
        tls=NodeTLSFiles.issue(ca, "n0"),
    ).start()
    yield node
    node.stop()


def broken_batch() -> list[pb.Message]:
    """Two messages whose Ed25519 signatures do not verify (one byte of each flipped)."""
    actor = RemoteActor()
    msgs = [actor.b.follow(bytes([i]) * 20) for i in range(1, 3)]
    for m in msgs:
        m.signature = bytes([m.signature[0] ^ 1]) + m.signature[1:]
    return msgs


def submit_with_proof(channel: grpc.Channel, msgs: list[pb.Message]) -> rpc_pb2.BatchSubmitMessagesResponse:
    stub = service_pb2_grpc.ChainServiceStub(channel)
    request = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs)
    response: rpc_pb2.BatchSubmitMessagesResponse = stub.BatchSubmitMessages(
        request, metadata=MemberProof(SECRET).metadata(msgs), timeout=10
    )
    return response


def node_status(channel: grpc.Channel) -> rpc_pb2.GetNodeStatusResponse:
    response: rpc_pb2.GetNodeStatusResponse = service_pb2_grpc.ChainServiceStub(channel).GetNodeStatus(
        rpc_pb2.GetNodeStatusRequest(), timeout=5
    )
    return response


def test_a_broken_signature_with_a_valid_member_proof_is_refused_on_the_public_port(
    tls_node: NodeProcess, ca: TestCA
) -> None:
    with sync_channel(tls_node.grpcs_target, ClientTLS(ca_file=ca.cert)) as channel:
        results = submit_with_proof(channel, broken_batch()).results
    assert [r.accepted for r in results] == [False, False]
    assert {r.reason_code for r in results} == {Reason.INVALID_SIGNATURE.value}


def test_the_member_proof_is_honoured_on_the_internal_listener_from_a_member(tls_node: NodeProcess, ca: TestCA) -> None:
    """The other side of the gate above: a member (certificate of the cluster's CA, the secret) is trusted to
    have verified what it forwards, so the signatures of the same kind of batch are not checked there (the
    state still is: the actor is unknown, UNKNOWN_SIGNER, not INVALID_SIGNATURE). This is why the proof must
    never be honoured on the public port."""
    assert tls_node.tls is not None
    with sync_channel(f"grpcs://{tls_node.internal_target}", tls_node.tls.client_tls()) as channel:
        results = submit_with_proof(channel, broken_batch()).results
    assert [(r.accepted, r.reason_code) for r in results] == [(False, Reason.UNKNOWN_SIGNER.value)] * 2


@pytest.mark.parametrize("who", ["no certificate", "another CA", "plaintext"])
def test_the_internal_listener_refuses_a_peer_without_a_certificate_of_the_cluster_ca(
    tls_node: NodeProcess, ca: TestCA, tmp_path: Path, who: str
) -> None:
    if who == "no certificate":
        channel = sync_channel(f"grpcs://{tls_node.internal_target}", ClientTLS(ca_file=ca.cert))
    elif who == "another CA":
        stranger = TestCA.make(tmp_path / "other").issue("stranger")
        tls = ClientTLS(ca_file=ca.cert, cert_file=stranger.cert, key_file=stranger.key)
        channel = sync_channel(f"grpcs://{tls_node.internal_target}", tls)
    else:
        channel = sync_channel(tls_node.internal_target)
    with channel, pytest.raises(grpc.RpcError) as err:
        submit_with_proof(channel, broken_batch())
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_the_public_port_serves_no_internal_service(tls_node: NodeProcess, ca: TestCA) -> None:
    with sync_channel(tls_node.grpcs_target, ClientTLS(ca_file=ca.cert)) as channel:
        sync = snapshot_sync_service_pb2_grpc.SnapshotSyncServiceStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            sync.GetSnapshotManifest(snapshot_sync_pb2.GetSnapshotManifestRequest(name="x"), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        batch = channel.stream_stream("/chain.v1.ReadBatchService/ReadBatch", None, None)
        with pytest.raises(grpc.RpcError) as err:
            list(batch(iter([b""]), timeout=5))
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert tls_node.tls is not None
    with sync_channel(f"grpcs://{tls_node.internal_target}", tls_node.tls.client_tls()) as channel:
        sync = snapshot_sync_service_pb2_grpc.SnapshotSyncServiceStub(channel)
        with pytest.raises(grpc.RpcError) as err:  # served here: an unknown snapshot, not an unknown method
            sync.GetSnapshotManifest(snapshot_sync_pb2.GetSnapshotManifestRequest(name="x"), timeout=5)
        assert err.value.code() != grpc.StatusCode.UNIMPLEMENTED


def test_a_plaintext_client_gets_no_answer_from_a_tls_port(tls_node: NodeProcess) -> None:
    for target in (tls_node.grpc_target, tls_node.admin_target):
        with sync_channel(target) as channel, pytest.raises(grpc.RpcError) as err:
            node_status(channel)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_admin_requires_a_certificate_of_the_cluster_ca(tls_node: NodeProcess, ca: TestCA) -> None:
    request = admin_service_pb2.ListSnapshotJobsRequest()
    with sync_channel(f"grpcs://{tls_node.admin_target}", ClientTLS(ca_file=ca.cert)) as channel:
        with pytest.raises(grpc.RpcError) as err:
            admin_service_pb2_grpc.AdminServiceStub(channel).ListSnapshotJobs(request, timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert tls_node.tls is not None
    with sync_channel(f"grpcs://{tls_node.admin_target}", tls_node.tls.client_tls()) as channel:
        admin_service_pb2_grpc.AdminServiceStub(channel).ListSnapshotJobs(request, timeout=5)


def served_serial(port: int, ca: TestCA, alpn: str) -> int:
    """The serial number of the certificate a new TLS connection to `port` is given."""
    ctx = ssl.create_default_context(cafile=str(ca.cert))
    ctx.set_alpn_protocols([alpn])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def test_a_renewed_certificate_is_served_without_a_restart_while_a_stream_stays_open(
    tmp_path: Path, ca: TestCA
) -> None:
    files = NodeTLSFiles.issue(ca, "renewed")
    node = NodeProcess(tmp_path / "data", tls=files).start()
    try:
        ports = {"grpc": (node.ready["grpc_port"], "h2"), "web": (node.ready["web_port"], "http/1.1")}
        first = ca.serial_of(files.cert)
        assert {served_serial(p, ca, alpn) for p, alpn in ports.values()} == {first}
        received: list[int] = []
        with sync_channel(node.grpcs_target, ClientTLS(ca_file=ca.cert)) as channel:
            stream = service_pb2_grpc.ChainServiceStub(channel).SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest())

            def read() -> None:
                with contextlib.suppress(grpc.RpcError):  # cancelled at the end
                    for item in stream:
                        received.append(item.block.header.number)

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            assert wait_until(lambda: len(received) >= 1, 30), "no block on the stream"
            ca.issue("renewed", cert_path=files.cert, key_path=files.key)  # the files replaced on disk
            second = ca.serial_of(files.cert)
            assert second != first
            assert wait_until(lambda: all(served_serial(p, ca, alpn) == second for p, alpn in ports.values()), 10), (
                "the renewed certificate is not served"
            )
            seen = len(received)
            assert wait_until(lambda: len(received) > seen, 30), "the open stream stopped at the renewal"
            assert reader.is_alive()
            stream.cancel()
    finally:
        node.stop()


def test_streams_beyond_max_streams_are_refused_with_a_reason_and_a_hint(tls_node: NodeProcess, ca: TestCA) -> None:
    with sync_channel(tls_node.grpcs_target, ClientTLS(ca_file=ca.cert)) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        open_ = [stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest()) for _ in range(3)]
        try:
            for stream in open_:  # each one holds its place once its first block arrives
                next(stream)  # type: ignore[call-overload]
            extra = stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(), timeout=10)
            with pytest.raises(grpc.RpcError) as err:
                next(extra)  # type: ignore[call-overload]
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert trailer(err.value.trailing_metadata(), REASON_CODE) == Reason.TOO_MANY_STREAMS.value
            assert int(trailer(err.value.trailing_metadata(), RETRY_AFTER_MS) or 0) > 0
        finally:
            for stream in open_:
                stream.cancel()
        assert wait_until(lambda: _opens(stub), 10), "a place freed is not given again"


def _opens(stub: service_pb2_grpc.ChainServiceStub) -> bool:
    stream = stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(), timeout=10)
    try:
        next(stream)  # type: ignore[call-overload]
    except grpc.RpcError:
        return False
    finally:
        stream.cancel()
    return True


def test_listeners_beyond_loopback_without_tls_are_said_in_one_line() -> None:
    assert plaintext_line(parse_config([], env={})) is None  # the devnet: loopback only
    exposed = parse_config(["--grpc-addr", "0.0.0.0:50051", "--internal-addr", "10.0.0.5:50054"], env={})
    line = plaintext_line(exposed)
    assert line is not None and "\n" not in line
    assert "--grpc-addr 0.0.0.0:50051" in line and "--internal-addr 10.0.0.5:50054" in line
    assert "--web-addr" not in line  # still on loopback
    tls = ["--tls-cert", "c", "--tls-key", "k", "--tls-client-ca", "ca"]
    assert plaintext_line(parse_config([*tls, "--grpc-addr", "0.0.0.0:1"], env={})) is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tls-cert", "c"], "--tls-cert and --tls-key go together"),
        (["--tls-cert", "c", "--tls-key", "k"], "give --tls-client-ca"),
        (["--tls-client-ca", "ca"], "needs --tls-cert"),
    ],
)
def test_tls_flags_that_do_not_fit_together_are_one_line(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_config(args, env={})
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_a_missing_certificate_file_stops_the_start_in_one_line(tmp_path: Path, ca: TestCA) -> None:
    files = NodeTLSFiles(tmp_path / "absent.pem", tmp_path / "absent.key", ca.cert)
    node = NodeProcess(tmp_path / "data", tls=files)
    with pytest.raises(RuntimeError, match="exited"):
        node.start(timeout=30)
    assert any("--tls-cert" in line and "absent.pem" in line for line in node.stderr_lines)
    assert not any("Traceback" in line for line in node.stderr_lines)


def test_a_plaintext_internal_listener_does_not_honour_the_member_proof(tmp_path: Path) -> None:
    """Without TLS nobody's certificate was checked, so whoever reaches the internal port with the secret
    would skip the signature checks: the proof counts only from a peer that completed mutual TLS."""
    node = NodeProcess(tmp_path / "data", "--cluster-secret", SECRET.decode()).start()
    try:
        with sync_channel(node.internal_target) as channel:
            results = submit_with_proof(channel, broken_batch()).results
    finally:
        node.stop()
    assert {r.reason_code for r in results} == {Reason.INVALID_SIGNATURE.value}


def test_read_workers_serve_the_public_port_over_tls(tmp_path: Path, ca: TestCA) -> None:
    """With read workers every process on the public port serves TLS: new connections (spread over the
    workers by the kernel) all handshake, and a plaintext one is answered by none of them."""
    node = NodeProcess(tmp_path / "data", "--read-workers", "2", tls=NodeTLSFiles.issue(ca, "workers")).start(120)
    try:
        for _ in range(12):  # a new channel each time: a new connection, to whichever process the kernel picks
            with sync_channel(node.grpcs_target, ClientTLS(ca_file=ca.cert)) as channel:
                stub = service_pb2_grpc.ChainServiceStub(channel)
                stub.GetChainStats(rpc_pb2.GetChainStatsRequest(), timeout=10)  # answered by a worker itself
        with sync_channel(node.grpc_target) as channel, pytest.raises(grpc.RpcError) as err:
            node_status(channel)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        node.stop()
