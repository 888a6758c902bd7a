// connect-web (gRPC-web over Node's fetch) against a real chain-node's --web-addr.
//
// Run by tests/node/grpcweb/test_grpcweb_node.py:
//   node node_client.mjs '{"baseUrl": ..., "genDir": ..., "allowedOrigin": ..., "refusedOrigin": ..., "blocks": N}'
// Prints one JSON object with what it observed.

import path from "node:path";
import { pathToFileURL } from "node:url";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";

const cfg = JSON.parse(process.argv[2]);
const { ChainService } = await import(pathToFileURL(path.join(cfg.genDir, "chain/v1/service_pb.js")).href);
const client = createClient(ChainService, createGrpcWebTransport({ baseUrl: cfg.baseUrl }));
const out = {};

const status = (await client.getNodeStatus({})).status;
out.status = { height: status.blockHeight.toString(), network: status.network, role: status.role };
out.stats = { blocks: (await client.getChainStats({})).stats.totalBlocks.toString() };

try {
  await client.getProject({ projectId: new Uint8Array(32) });
  out.notFound = "no error";
} catch (e) {
  const err = ConnectError.from(e);
  out.notFound = { code: Code[err.code], reasonCode: err.metadata.get("reason-code") };
}

// SubscribeBlocks from block 1: history, then live blocks, in order; cancel after N.
out.blocks = [];
const abort = new AbortController();
try {
  for await (const ev of client.subscribeBlocks({ fromBlock: 1n }, { signal: abort.signal })) {
    out.blocks.push(Number(ev.block.header.number));
    if (out.blocks.length >= cfg.blocks) abort.abort();
  }
} catch (e) {
  out.streamEnd = Code[ConnectError.from(e).code];
}

async function preflight(origin) {
  const res = await fetch(`${cfg.baseUrl}/chain.v1.ChainService/GetNodeStatus`, {
    method: "OPTIONS",
    headers: {
      Origin: origin,
      "Access-Control-Request-Method": "POST",
      "Access-Control-Request-Headers": "content-type,x-grpc-web,x-user-agent",
    },
  });
  return { status: res.status, allowOrigin: res.headers.get("access-control-allow-origin") };
}
out.preflightAllowed = await preflight(cfg.allowedOrigin);
out.preflightRefused = await preflight(cfg.refusedOrigin);
console.log(JSON.stringify(out));
