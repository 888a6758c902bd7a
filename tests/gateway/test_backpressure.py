"""Back-pressure: every retryable refusal carries `retry-after-ms` from the node, and REST
answers it with 429 (MEMPOOL_FULL) or 503 (STORAGE_FAILED, NOT_LEADER, DRAINING) and `Retry-After` in whole
seconds, rounded up. A full mempool is driven for real: a node whose blocks are far apart and whose mempool
holds three messages, over gRPC and through a chain-gateway process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import requests
from aiohttp import web
from google.protobuf import json_format

from chain.v1 import message_pb2 as pb
from gateway.errors import error_middleware, retry_after
from node.errors import MessageRejected, Reason
from node.sdk.rpc import reason_of
from node.server.rpc.status import to_status
from tests.fixtures.actors import RemoteActor
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess


def fresh() -> pb.Message:
    actor = RemoteActor()
    msg: pb.Message = actor.b.signer_add(actor.wallet, 0)
    return msg


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, GatewayProcess]]:
    # the devnet bootstrap message takes the first block; after that no block for a minute
    node = NodeProcess(
        tmp_path_factory.mktemp("bp") / "data",
        "--web-addr", "", "--mempool-capacity", "3", "--block-interval", "60", "--empty-block-interval", "600",
    ).start()  # fmt: skip
    gw = GatewayProcess(node.grpc_target).start()
    try:
        yield node, gw
    finally:
        gw.stop()
        node.stop()


def test_mempool_full_carries_retry_after_over_grpc_and_rest(full: tuple[NodeProcess, GatewayProcess]) -> None:
    node, gw = full
    with node.client(timeout=10) as client:
        refusal: grpc.RpcError | None = None
        for _ in range(6):
            try:
                client.submit(fresh())
            except grpc.RpcError as err:
                refusal = err
                break
        assert refusal is not None and isinstance(refusal, grpc.Call)
        assert refusal.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and reason_of(refusal) == "MEMPOOL_FULL"
        trailers = dict(refusal.trailing_metadata() or ())
        assert int(trailers["retry-after-ms"]) > 0
    resp = requests.post(gw.url + "/v1/messages", json=json_format.MessageToDict(fresh()), timeout=10)
    assert resp.status_code == 429
    assert resp.json()["error"]["code"] == "MEMPOOL_FULL"
    assert resp.headers["Retry-After"] == "1"


def test_every_retryable_reason_names_a_wait() -> None:
    for reason in (Reason.MEMPOOL_FULL, Reason.NOT_LEADER, Reason.STORAGE_FAILED, Reason.DRAINING):
        _status, _message, trailers = to_status(MessageRejected(reason, "busy"))
        assert int(dict(trailers)["retry-after-ms"]) > 0, reason
    own = dict(to_status(MessageRejected(Reason.STORAGE_FAILED, "disk", retry_after_ms=4200))[2])
    assert own["retry-after-ms"] == "4200"  # the refusal's own hint wins
    assert "retry-after-ms" not in dict(to_status(MessageRejected(Reason.NONCE_MISMATCH, "no"))[2])


@pytest.mark.parametrize(
    ("code", "reason", "ms", "status", "seconds"),
    [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "MEMPOOL_FULL", "1000", 429, "1"),
        (grpc.StatusCode.UNAVAILABLE, "STORAGE_FAILED", "1500", 503, "2"),
        (grpc.StatusCode.UNAVAILABLE, "NOT_LEADER", "1", 503, "1"),
        (grpc.StatusCode.UNAVAILABLE, "DRAINING", "100", 503, "1"),
    ],
)
async def test_rest_maps_retryable_refusals_with_retry_after(
    aiohttp_client: Any, code: grpc.StatusCode, reason: str, ms: str, status: int, seconds: str
) -> None:
    trailers = grpc.aio.Metadata(("reason-code", reason), ("reason-values", "{}"), ("retry-after-ms", ms))

    async def refuse(request: web.Request) -> web.Response:
        raise grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailers, "try later", None)

    app = web.Application(middlewares=[error_middleware])
    app.router.add_post("/v1/messages", refuse)
    client = await aiohttp_client(app)
    resp = await client.post("/v1/messages")
    assert resp.status == status
    assert resp.headers["Retry-After"] == seconds
    assert json.loads(await resp.text())["error"]["code"] == reason


def test_refusals_without_a_hint_have_no_retry_after() -> None:
    trailers = grpc.aio.Metadata(("reason-code", "NONCE_MISMATCH"))
    plain = grpc.aio.AioRpcError(grpc.StatusCode.FAILED_PRECONDITION, grpc.aio.Metadata(), trailers, "", None)
    assert retry_after(plain) == {}
