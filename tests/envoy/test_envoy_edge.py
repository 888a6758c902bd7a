"""The public edge, through the real Envoy, on the shipped envoy/envoy-tls.yaml and on what the Helm chart
renders (each test runs on both): only the public services are routed, metadata only members may send never
reaches an upstream, TLS on the listener for gRPC and gRPC-web (a plaintext client gets no answer), TLS to the
upstream checked against the cluster CA, and writes limited per client address.

The upstream is a recorder (tests/envoy/edge.py), so what reached it is seen directly;
tests/envoy/test_envoy_node_tls.py puts a real node behind the same configurations.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import grpc
import pytest

from tests.envoy.edge import (
    SOURCES,
    UNAVAILABLE,
    UNIMPLEMENTED,
    Pki,
    Recorder,
    grpc_web,
    native,
    start_edge,
)
from tests.fixtures.certs import TestCA
from tests.fixtures.envoyproc import EnvoyProcess
from tests.fixtures.procs import wait_until

PUBLIC = (
    "/chain.v1.ChainService/GetNodeStatus",
    "/chain.v1.ChainService/SubmitMessage",
    "/chain.v1.KeychainService/ListCustodyKeys",
    "/grpc.health.v1.Health/Any",  # Check and Watch are the servicer's; any method of the service is routed
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
)
INTERNAL = (
    "/chain.v1.SnapshotSyncService/GetSnapshotManifest",
    "/chain.v1.SnapshotSyncService/GetSnapshotChunks",
    "/chain.v1.ReadBatchService/ReadBatch",
    "/chain.v1.ReadBatchService/ReadStream",
    "/chain.v1.AdminService/CreateSnapshot",
    "/chain.v1.AdminService/ListSnapshotJobs",
    "/chain.v2.ChainService/GetNodeStatus",
    "/chain.v1.ChainServiceX/GetNodeStatus",
    "/grpc.reflection.v1.Other/Method",
    "/chain.v1.ChainService/../chain.v1.AdminService/ListSnapshotJobs",
)
MEMBER_ONLY = {"chain-member-proof": "00" * 32, "chain-member-id": "n0", "chain-internal-forwarded": "1"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.make(tmp_path_factory.mktemp("edge-pki"))


@pytest.fixture(scope="module")
def recorder(pki: Pki) -> Iterator[Recorder]:
    rec = Recorder(pki.upstream).start()
    yield rec
    rec.stop()


@pytest.fixture(scope="module", params=SOURCES)
def edge(request: pytest.FixtureRequest, pki: Pki, recorder: Recorder, tmp_path_factory) -> Iterator[EnvoyProcess]:
    proxy = start_edge(request.param, pki, recorder.port, tmp_path_factory.mktemp(f"edge-{request.param}"))
    yield proxy
    proxy.stop()


async def test_only_the_public_services_reach_an_upstream(edge: EnvoyProcess, pki: Pki, recorder: Recorder) -> None:
    with pki.channel(edge.target) as channel:
        for method in PUBLIC:
            assert native(channel, method)[0] == grpc.StatusCode.OK, method
            assert recorder.methods()[-1] == method
        before = len(recorder.methods())
        for method in INTERNAL:
            code, trailers = native(channel, method)
            assert code == grpc.StatusCode.UNIMPLEMENTED, (method, code)
            assert trailers["reason-code"] == "UNIMPLEMENTED"
    for method in INTERNAL:
        answer = await grpc_web(edge.https_url, method, ssl_context=pki.client_context())
        refused = (answer[":status"], answer["grpc-status"], answer["reason-code"])
        assert refused == ("404", UNIMPLEMENTED, "UNIMPLEMENTED"), (method, answer)
    assert recorder.methods()[before:] == [], "an internal or unknown service reached the upstream"


async def test_metadata_only_members_may_send_never_reaches_an_upstream(
    edge: EnvoyProcess, pki: Pki, recorder: Recorder
) -> None:
    method = "/chain.v1.ChainService/BatchSubmitMessages"
    sent = [*MEMBER_ONLY.items(), ("x-client-note", "kept")]
    with pki.channel(edge.target) as channel:
        assert native(channel, method, sent)[0] == grpc.StatusCode.OK
    seen = recorder.last(method).metadata
    assert seen.get("x-client-note") == "kept"
    assert not {k for k in seen if k.startswith(("chain-member-", "chain-internal-"))}, seen
    # gRPC-web: the same headers over HTTP/1.1, in any case
    headers = {"Chain-Member-Proof": "00" * 32, "CHAIN-INTERNAL-HOP": "1", "x-client-note": "web"}
    answer = await grpc_web(edge.https_url, method, ssl_context=pki.client_context(), headers=headers)
    assert answer["grpc-status"] == "0"
    seen = recorder.last(method).metadata
    assert seen.get("x-client-note") == "web"
    assert not {k for k in seen if k.startswith(("chain-member-", "chain-internal-"))}, seen


async def test_read_consistency_metadata_reaches_an_upstream(edge: EnvoyProcess, pki: Pki, recorder: Recorder) -> None:
    """What a consistent read asks (docs/replication.md) passes the edge both ways; browsers may send it and
    read the height an answer names."""
    method = "/chain.v1.ChainService/GetNodeStatus"
    sent = [("chain-min-height", "7"), ("chain-read-consistency", "linearizable")]
    with pki.channel(edge.target) as channel:
        assert native(channel, method, sent)[0] == grpc.StatusCode.OK
    seen = recorder.last(method).metadata
    assert (seen.get("chain-min-height"), seen.get("chain-read-consistency")) == ("7", "linearizable"), seen
    headers = {"Chain-Min-Height": "8", "Chain-Read-Consistency": "serializable"}
    answer = await grpc_web(edge.https_url, method, ssl_context=pki.client_context(), headers=headers)
    assert answer["grpc-status"] == "0"
    seen = recorder.last(method).metadata
    assert (seen.get("chain-min-height"), seen.get("chain-read-consistency")) == ("8", "serializable"), seen
    assert "chain-height" in answer["access-control-expose-headers"]


def negotiated(port: int, ca: Path, alpn: str) -> str | None:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.set_alpn_protocols([alpn])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return tls.selected_alpn_protocol()


async def test_the_listener_serves_grpc_and_grpc_web_over_tls_only(edge: EnvoyProcess, pki: Pki) -> None:
    assert negotiated(edge.port, pki.ca.cert, "h2") == "h2"
    assert negotiated(edge.port, pki.ca.cert, "http/1.1") == "http/1.1"
    with pki.channel(edge.target) as channel:
        assert native(channel, "/chain.v1.ChainService/GetNodeStatus")[0] == grpc.StatusCode.OK
    answer = await grpc_web(edge.https_url, "/chain.v1.ChainService/GetNodeStatus", ssl_context=pki.client_context())
    assert answer["grpc-status"] == "0"
    # plaintext: no answer, native or gRPC-web
    with grpc.insecure_channel(edge.target) as channel:
        assert native(channel, "/chain.v1.ChainService/GetNodeStatus")[0] == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(aiohttp.ClientError):
        await grpc_web(edge.url, "/chain.v1.ChainService/GetNodeStatus")


def test_the_upstream_must_present_a_certificate_of_the_cluster_ca(tmp_path: Path, pki: Pki) -> None:
    stranger_dir = tmp_path / "stranger"
    stranger_dir.mkdir()
    stranger = TestCA.make(tmp_path / "other").issue("node", cert_path=stranger_dir / "tls.crt")
    impostor = Recorder(stranger).start()
    try:
        proxy = start_edge("shipped", pki, impostor.port, tmp_path / "edge", healthy=0)
        try:
            assert not wait_until(lambda: any(proxy.host_health().values()), 3), "envoy trusted a stranger"
            with pki.channel(proxy.target) as channel:
                assert native(channel, "/chain.v1.ChainService/GetNodeStatus")[0] == grpc.StatusCode.UNAVAILABLE
            assert impostor.methods() == []
        finally:
            proxy.stop()
    finally:
        impostor.stop()


async def test_writes_are_limited_per_client_address(edge: EnvoyProcess, pki: Pki) -> None:
    """Last in the module: it leaves 127.0.0.1's bucket empty. The shipped limit: 100 at once, 50 a second."""
    ctx = pki.client_context()
    write = "/chain.v1.ChainService/BatchSubmitMessages"
    passed = 0
    for _ in range(400):
        answer = await grpc_web(edge.https_url, write, ssl_context=ctx)
        if answer["grpc-status"] != "0":
            break
        passed += 1
    assert passed >= 100, passed
    # gRPC-web: HTTP 429; Envoy's gRPC-web filter derives grpc-status from it (UNAVAILABLE), the reason says why
    assert (answer[":status"], answer["grpc-status"]) == ("429", UNAVAILABLE), answer
    assert answer["reason-code"] == "RESOURCE_EXHAUSTED"
    assert answer["retry-after-ms"] == "1000"
    assert "retry-after-ms" in answer["access-control-expose-headers"]
    with pki.channel(edge.target) as channel:  # the same address over native gRPC
        # the bucket refills 50 a second while the channel handshakes: send until a refill is spent again
        for _ in range(400):
            code, trailers = native(channel, "/chain.v1.ChainService/SubmitMessage")
            if code != grpc.StatusCode.OK:
                break
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert trailers["reason-code"] == "RESOURCE_EXHAUSTED" and trailers["retry-after-ms"] == "1000"
        assert native(channel, "/chain.v1.ChainService/GetNodeStatus")[0] == grpc.StatusCode.OK  # reads are not
    # another client address is not held back by this one
    answer = await grpc_web(edge.https_url, write, ssl_context=ctx, source="127.0.0.2")
    assert answer["grpc-status"] == "0"
