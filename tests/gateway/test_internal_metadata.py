"""The members' own metadata (`chain-member-proof`, gateway/internal.py) never crosses the gateway.

Two ways to check it: an upstream that records what reaches it (the gate: fails when the gateway forwards
the header), and a real node with a cluster secret, where a batch whose signatures do not verify, sent
through the gateway with a proof made with that very secret, is refused INVALID_SIGNATURE. Each runs with
the passthrough forwarding to `--node-web-url` and bridging onto native gRPC."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from gateway.internal import INTERNAL_METADATA
from node.server.write.membership import PROOF_KEY, MemberProof
from tests.fixtures.actors import RemoteActor
from tests.fixtures.nodeproc import NodeProcess
from tests.gateway.conftest import MakeClient
from tests.gateway.grpcweb_frames import GRPC_WEB, frame, frames

SECRET = b"members-only-secret-0123456789"
BATCH = "/v1/grpc-web/chain.v1.ChainService/BatchSubmitMessages"


def broken_batch() -> list[pb.Message]:
    """Two messages whose Ed25519 signatures do not verify (one byte of each flipped)."""
    actor = RemoteActor()
    msgs = [actor.b.follow(bytes([i]) * 20) for i in range(1, 3)]
    for m in msgs:
        m.signature = bytes([m.signature[0] ^ 1]) + m.signature[1:]
    return msgs


def proved_request(msgs: list[pb.Message]) -> tuple[bytes, dict[str, str]]:
    """The gRPC-web body of a batch and headers carrying a proof made with the node's own secret."""
    body = frame(rpc_pb2.BatchSubmitMessagesRequest(messages=msgs).SerializeToString())
    proof = dict(MemberProof(SECRET).metadata(msgs))
    return body, {**GRPC_WEB, **proof, "Chain-Member-Proof-Extra": "kept"}


def test_the_list_names_the_member_proof() -> None:
    assert PROOF_KEY in INTERNAL_METADATA


class Recorder(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    """A gRPC 'node' that records the metadata of each batch submitted (the gateway's event feeds call it too)
    and answers an empty batch response to every call."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[bytes, bytes] | None:
        if details.method.endswith("/BatchSubmitMessages"):
            self.seen.append(dict(details.invocation_metadata or ()))

        async def answer(_request: bytes, _context: Any) -> bytes:
            return rpc_pb2.BatchSubmitMessagesResponse().SerializeToString()

        return grpc.unary_unary_rpc_method_handler(answer)


@pytest.fixture
async def recording_node() -> AsyncIterator[tuple[str, Recorder]]:
    recorder = Recorder()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((recorder,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}", recorder
    await server.stop(None)


@pytest.fixture
async def recording_web() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append({k.lower(): v for k, v in request.headers.items()})
        body = frame(b"") + frame(b"grpc-status:0\r\n", 0x80)
        return web.Response(body=body, content_type="application/grpc-web+proto")

    app = web.Application()
    app.router.add_post("/{service}/{method}", answer)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("")).rstrip("/"), seen
    await server.close()


async def test_the_bridge_does_not_forward_the_proof(
    make_gateway_client: MakeClient, recording_node: tuple[str, Recorder]
) -> None:
    target, recorder = recording_node
    client = await make_gateway_client(node_addrs=(target,), node_web_url="")
    body, headers = proved_request(broken_batch())
    resp = await client.post(BATCH, data=body, headers=headers)
    assert resp.status == 200, await resp.text()
    assert recorder.seen, "the call never reached the recording node"
    assert PROOF_KEY not in recorder.seen[-1], "the gateway forwarded chain-member-proof"
    assert recorder.seen[-1].get("chain-member-proof-extra") == "kept"  # other metadata still goes on


async def test_the_web_passthrough_does_not_forward_the_proof(
    make_gateway_client: MakeClient, recording_web: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = recording_web
    client = await make_gateway_client(node_web_url=url)
    body, headers = proved_request(broken_batch())
    resp = await client.post(BATCH, data=body, headers=headers)
    assert resp.status == 200, await resp.text()
    assert seen, "the request never reached the recording node"
    assert PROOF_KEY not in seen[-1], "the gateway forwarded chain-member-proof"
    assert seen[-1].get("chain-member-proof-extra") == "kept"


@pytest.fixture(scope="module")
def secret_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    proc = NodeProcess(Path(tmp_path_factory.mktemp("secret-node")) / "node", "--cluster-secret", SECRET.decode())
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize("mode", ["node-web", "native"])
async def test_a_forged_proof_through_the_gateway_is_verified_in_full(
    make_gateway_client: MakeClient, secret_node: NodeProcess, mode: str
) -> None:
    web_url = secret_node.web_url if mode == "node-web" else ""
    client = await make_gateway_client(node_addrs=(secret_node.grpc_target,), node_web_url=web_url)
    body, headers = proved_request(broken_batch())
    resp = await client.post(BATCH, data=body, headers=headers)
    assert resp.status == 200, await resp.text()
    got = frames(await resp.read())
    data = [payload for flag, payload in got if not flag & 0x80]
    assert "grpc-status:0" in got[-1][1].decode().replace(" ", "")
    results = rpc_pb2.BatchSubmitMessagesResponse.FromString(data[0]).results
    assert [(r.accepted, r.reason_code) for r in results] == [(False, "INVALID_SIGNATURE")] * 2
