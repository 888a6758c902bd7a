"""The gateway's node-facing side: the nodes it knows, how reads reach them, and the one interface the REST
and event handlers call.

    pool = NodePool(["grpcs://node:50051"], internal=["node:50061"], tls=NodeTLS.of(config))
    resp = await pool.fetch(GET_ACCOUNT, rpc_pb2.GetAccountRequest(...))   # a read by method path
    raw = await pool.fetch_bytes(GET_ACCOUNT.path, request_bytes)           # the same, bytes on the wire
    resp = await pool.read(lambda u, t: u.chain.GetNodeStatus(req, timeout=t))  # a stub read, public port
    resp = await pool.write(lambda u, t: u.chain.SubmitMessage(req, timeout=t))  # never retried

- `pool.py`: `NodePool` (round robin over the public nodes and the internal listeners, reads retried on the
  next node when one answers UNAVAILABLE), `Upstream` (one address: channel, stubs, batcher), `NodeTLS`.
- `batching.py`: the reads of one event-loop turn coalesced into one ReadBatch call (`ReadBatcher`, `Read`).
- `readstream.py`: each batch as a message of one long-lived ReadStream per channel.

The streams (SSE relays, history) take an `Upstream` from `pool.pick()` and call its stubs.
"""

from gateway.upstream.batching import Read
from gateway.upstream.pool import NodePool, NodeTLS, Upstream

__all__ = ["NodePool", "NodeTLS", "Read", "Upstream"]
