"""Gateway readiness: ready when SOME node serves.

`GET /v1/health` asks every node the gateway knows (`GetHealth`, all at once, each under the request timeout)
and answers 200 with the first ready node's body as soon as one is ready. When none is ready but some answered,
503 with one of those bodies (the node is live, not ready); when none answered, the last gRPC error (mapped to
503 UNAVAILABLE by gateway/errors.py). One NOT_SERVING or unreachable node therefore never makes a gateway
unready while another node serves.

The nodes the gateway knows are its `--node-addr` entries; a `dns:///host:port` entry stands for every address
the name resolves to now (a headless Service: one A record per node pod), each probed on its own channel.
"""

from __future__ import annotations

import asyncio

import grpc

from chain.v1 import rpc_pb2
from gateway.upstream import NodePool


async def any_ready(pool: NodePool) -> rpc_pb2.GetHealthResponse:
    """The first ready node's health, else a live node's, else raise the last node's gRPC error."""
    upstreams = await pool.probes.targets(pool.upstreams)
    if not upstreams:
        raise grpc.aio.AioRpcError(
            grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "no node address resolves", ""
        )
    calls = [
        asyncio.ensure_future(u.chain.GetHealth(rpc_pb2.GetHealthRequest(), timeout=pool.timeout)) for u in upstreams
    ]
    live: rpc_pb2.GetHealthResponse | None = None
    error: grpc.aio.AioRpcError | None = None
    try:
        for next_done in asyncio.as_completed(calls):
            try:
                resp: rpc_pb2.GetHealthResponse = await next_done
            except grpc.aio.AioRpcError as err:
                error = err
                continue
            if resp.ready:
                return resp
            live = live or resp
    finally:
        for c in calls:
            c.cancel()
    if live is not None:
        return live
    assert error is not None
    raise error
