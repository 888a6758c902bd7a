"""The TLS edge in front of a real node that serves TLS (`--tls-cert/--tls-key/--tls-client-ca`), on the
shipped envoy/envoy-tls.yaml and on the chart's rendering: Envoy dials the node over TLS trusting the cluster
CA, a client reaches it over TLS with gRPC and gRPC-web, a batch with broken signatures carrying a valid member
proof is refused INVALID_SIGNATURE (the proof is stripped at the edge and the public port never honours one),
the internal services are refused, a renewed edge certificate is served without a restart, and the overload
manager refuses requests once its heap budget is spent."""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.errors import Reason
from node.server.write.membership import MemberProof
from tests.envoy.edge import SOURCES, Pki, grpc_web, native, start_edge
from tests.fixtures.actors import RemoteActor
from tests.fixtures.certs import Leaf
from tests.fixtures.envoyproc import EnvoyProcess
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles
from tests.fixtures.procs import wait_until

SECRET = b"members-only-secret-0123456789"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.make(tmp_path_factory.mktemp("edge-node-pki"))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[NodeProcess]:
    files = NodeTLSFiles(pki.upstream.cert, pki.upstream.key, pki.ca.cert)
    proc = NodeProcess(tmp_path_factory.mktemp("tls-node") / "data", "--cluster-secret", SECRET.decode(), tls=files)
    yield proc.start()
    proc.stop()


@pytest.fixture(scope="module", params=SOURCES)
def edge(request: pytest.FixtureRequest, pki: Pki, node: NodeProcess, tmp_path_factory) -> Iterator[EnvoyProcess]:
    workdir = tmp_path_factory.mktemp(f"edge-node-{request.param}")
    proxy = start_edge(request.param, pki, node.ready["grpc_port"], workdir)
    yield proxy
    proxy.stop()


def broken_batch() -> list[pb.Message]:
    """Two messages whose Ed25519 signatures do not verify (one byte of each flipped)."""
    actor = RemoteActor()
    msgs = [actor.b.follow(os.urandom(20)) for _ in range(2)]
    for m in msgs:
        m.signature = bytes([m.signature[0] ^ 1]) + m.signature[1:]
    return msgs


async def test_clients_reach_a_tls_node_through_envoy_over_tls(edge: EnvoyProcess, pki: Pki) -> None:
    with pki.channel(edge.target) as channel:
        status = service_pb2_grpc.ChainServiceStub(channel).GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=10)
        assert status.status.block_height >= 0
    answer = await grpc_web(edge.https_url, "/chain.v1.ChainService/GetNodeStatus", ssl_context=pki.client_context())
    assert answer["grpc-status"] == "0", answer


def test_a_broken_signature_with_a_member_proof_is_refused_through_envoy(edge: EnvoyProcess, pki: Pki) -> None:
    msgs = broken_batch()
    request = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs)
    with pki.channel(edge.target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        results = stub.BatchSubmitMessages(request, metadata=MemberProof(SECRET).metadata(msgs), timeout=10).results
    assert [r.accepted for r in results] == [False, False]
    assert {r.reason_code for r in results} == {Reason.INVALID_SIGNATURE.value}


def test_the_nodes_internal_services_are_refused_at_the_edge(edge: EnvoyProcess, pki: Pki) -> None:
    with pki.channel(edge.target) as channel:
        for method in ("/chain.v1.SnapshotSyncService/GetSnapshotManifest", "/chain.v1.ReadBatchService/ReadBatch"):
            code, trailers = native(channel, method)
            assert (code, trailers.get("reason-code")) == (grpc.StatusCode.UNIMPLEMENTED, "UNIMPLEMENTED"), method


def served_serial(port: int, ca: Path) -> int:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def secret_volume(directory: Path, pki: Pki, generation: int) -> None:
    """Write the edge pair the way the kubelet updates a Secret volume: files in a new timestamped directory,
    `..data` swapped to it by a rename, and `tls.crt`/`tls.key` links through `..data`."""
    stamp = directory / f"..gen{generation}"
    stamp.mkdir()
    pki.ca.issue("edge", cert_path=stamp / "tls.crt", key_path=stamp / "tls.key")
    tmp = directory / "..data_tmp"
    tmp.symlink_to(stamp.name)
    tmp.replace(directory / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(f"..data/{name}")


@pytest.mark.parametrize("source", SOURCES)
def test_a_renewed_edge_certificate_is_served_without_a_restart(
    source: str, tmp_path: Path, pki: Pki, node: NodeProcess
) -> None:
    volume = tmp_path / "listener"
    volume.mkdir()
    secret_volume(volume, pki, 1)
    edge_pki = Pki(pki.ca, Leaf(volume / "tls.crt", volume / "tls.key", "edge"), pki.upstream)
    first = pki.ca.serial_of(volume / "tls.crt")
    proxy = start_edge(source, edge_pki, node.ready["grpc_port"], tmp_path / "edge")
    try:
        assert served_serial(proxy.port, pki.ca.cert) == first
        secret_volume(volume, pki, 2)
        second = pki.ca.serial_of(volume / "tls.crt")
        assert second != first
        assert wait_until(lambda: served_serial(proxy.port, pki.ca.cert) == second, 10), "renewal not served"
        with pki.channel(proxy.target) as channel:
            assert native(channel, "/chain.v1.ChainService/GetNodeStatus")[0] == grpc.StatusCode.OK
    finally:
        proxy.stop()


def heap_budget(bytes_: int) -> Any:
    def mutate(config: dict[str, Any]) -> None:
        for monitor in config["overload_manager"]["resource_monitors"]:
            if monitor["name"] == "envoy.resource_monitors.fixed_heap":
                monitor["typed_config"]["max_heap_size_bytes"] = bytes_

    return mutate


@pytest.mark.parametrize("source", SOURCES)
def test_the_overload_manager_refuses_requests_beyond_the_heap_budget(
    source: str, tmp_path: Path, pki: Pki, node: NodeProcess
) -> None:
    """A budget far below what Envoy already holds: every action fires, new requests are refused (503 =
    UNAVAILABLE) and the node never sees them. The shipped action list is what runs; only the budget changes."""
    proxy = start_edge(source, pki, node.ready["grpc_port"], tmp_path / "edge", healthy=0, mutate=heap_budget(1 << 20))
    try:
        name = "overload.envoy.overload_actions.stop_accepting_requests.active"
        assert wait_until(lambda: proxy.admin_json(f"/stats?format=json&filter={name}")["stats"][0]["value"] == 1, 10)
        with pki.channel(proxy.target) as channel:
            code, _ = native(channel, "/chain.v1.ChainService/GetNodeStatus")
        assert code == grpc.StatusCode.UNAVAILABLE, code
    finally:
        proxy.stop()
