"""A real JavaScript gRPC-web client (connect-web, run by Node.js) against the Python gRPC-web server.

The client code is generated from proto/chain/v1 at test time into a temporary directory with the repo's
buf binary and the local protoc-gen-es plugin (tests/node/grpcweb/js/buf.gen.yaml): no generated JavaScript
is committed, so it cannot go stale, and nothing is fetched from the network. `make install-test` installs the
npm packages (package.json).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from chain.v1 import rpc_pb2
from tests.fixtures.grpcweb_stack import ALLOWED_ORIGIN, NOT_FOUND_DETAIL, STREAM_COUNT, running_stack

ROOT = Path(__file__).resolve().parents[3]
JS_DIR = Path(__file__).resolve().parent / "js"
NODE_MODULES = ROOT / "node_modules"


async def run_client(base_url: str, gen_dir: Path) -> dict[str, object]:
    config = {
        "baseUrl": base_url,
        "genDir": str(gen_dir),
        "allowedOrigin": ALLOWED_ORIGIN,
        "refusedOrigin": "https://evil.example",
    }
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(JS_DIR / "grpcweb_client.mjs"),
        json.dumps(config),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, stderr.decode()
    result: dict[str, object] = json.loads(stdout.decode().strip().splitlines()[-1])
    return result


async def test_connect_web_client(generated_js: Path) -> None:
    async with running_stack() as stack:
        await stack.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest())  # native first: counter 1
        out = await run_client(stack.url, generated_js)
        calls_by_js = stack.servicer.calls - 1
        # The JS client aborted its SubscribeMessages call: the server closed the generator.
        await asyncio.wait_for(stack.servicer.stream_finally.wait(), 5)

    # Unary through the same servicer instance the native call used (its counter went on from 1).
    assert out["nodeStatus"] == {"blockHeight": "2", "network": "testnet", "version": "1.2.3", "servedBy": "demo"}
    assert calls_by_js == 2  # the unary call above and the one from the allowed origin

    # Server streaming: every message, in order.
    assert out["blocks"] == [{"eventId": str(100 + i), "number": str(10 + i)} for i in range(STREAM_COUNT)]

    # Errors: trailers-only abort, and a failure after two streamed messages.
    assert out["notFound"] == {"code": "NotFound", "message": NOT_FOUND_DETAIL, "reasonCode": "PROJECT_NOT_FOUND"}
    assert out["brokenStream"] == {
        "received": 2,
        "code": "InvalidArgument",
        "message": "block stream broke",
        "reasonCode": "STREAM_BROKEN",
    }

    assert out["cancelledStream"] == {"received": 1, "code": "Canceled"}

    # CORS: preflight allowed and refused, then actual calls from each origin.
    allowed = out["preflightAllowed"]
    assert isinstance(allowed, dict)
    assert allowed["status"] == 204
    assert allowed["allowOrigin"] == ALLOWED_ORIGIN
    assert allowed["allowMethods"] == "POST, OPTIONS"
    assert {"content-type", "x-grpc-web", "x-user-agent", "grpc-timeout"} <= {
        h.strip() for h in allowed["allowHeaders"].split(",")
    }
    assert int(allowed["maxAge"]) > 0 and allowed["vary"] == "Origin"
    refused = out["preflightRefused"]
    assert isinstance(refused, dict)
    assert refused["status"] == 403 and refused["allowOrigin"] is None and refused["allowMethods"] is None

    call_allowed = out["callAllowed"]
    assert isinstance(call_allowed, dict)
    assert call_allowed["ok"] is True and call_allowed["allowOrigin"] == ALLOWED_ORIGIN
    assert "grpc-status" in call_allowed["exposeHeaders"]
    call_refused = out["callRefused"]
    assert isinstance(call_refused, dict)
    assert call_refused["ok"] is False and call_refused["code"] == "PermissionDenied"  # HTTP 403
