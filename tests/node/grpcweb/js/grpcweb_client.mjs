// A real browser-style gRPC-web client (connect-web over Node's global fetch) against the Python server.
//
// Run by tests/node/grpcweb/test_grpcweb_js.py:
//   node grpcweb_client.mjs '{"baseUrl": ..., "genDir": ..., "allowedOrigin": ..., "refusedOrigin": ...}'
// genDir holds the protobuf-es code generated from proto/chain/v1 (buf.gen.yaml beside this file).
// Prints one JSON object with what it observed; the pytest test asserts on it.

import path from "node:path";
import { pathToFileURL } from "node:url";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";

const cfg = JSON.parse(process.argv[2]);
const { ChainService } = await import(pathToFileURL(path.join(cfg.genDir, "chain/v1/service_pb.js")).href);

const client = createClient(ChainService, createGrpcWebTransport({ baseUrl: cfg.baseUrl }));
const out = {};

function describeError(e) {
  const err = ConnectError.from(e);
  return { code: Code[err.code], message: err.rawMessage, reasonCode: err.metadata.get("reason-code") };
}

// Unary, with the trailing metadata the servicer set.
{
  let trailer;
  const res = await client.getNodeStatus({}, { onTrailer: (t) => (trailer = t) });
  out.nodeStatus = {
    blockHeight: res.status.blockHeight.toString(),
    network: res.status.network,
    version: res.status.version,
    servedBy: trailer.get("x-served-by"),
  };
}

// Server streaming: every message, in order.
out.blocks = [];
for await (const ev of client.subscribeBlocks({ fromBlock: 10n })) {
  out.blocks.push({ eventId: ev.eventId.toString(), number: ev.block.header.number.toString() });
}

// An abort (trailers-only response) and an error in the middle of a stream.
try {
  await client.getProject({ projectId: new Uint8Array([0xab]) });
  out.notFound = "no error";
} catch (e) {
  out.notFound = describeError(e);
}
out.brokenStream = { received: 0 };
try {
  for await (const _ of client.subscribeBlocks({ fromBlock: 1n, includeChunks: true })) {
    out.brokenStream.received += 1;
  }
} catch (e) {
  Object.assign(out.brokenStream, describeError(e));
}

// The client cancels a stream after its first message (the server must close its generator).
{
  const abort = new AbortController();
  out.cancelledStream = { received: 0 };
  try {
    for await (const _ of client.subscribeMessages({}, { signal: abort.signal })) {
      out.cancelledStream.received += 1;
      abort.abort();
    }
  } catch (e) {
    out.cancelledStream.code = Code[ConnectError.from(e).code];
  }
}

// CORS as a browser would see it: the preflight, then the actual call carrying Origin.
async function preflight(origin) {
  const res = await fetch(`${cfg.baseUrl}/chain.v1.ChainService/GetNodeStatus`, {
    method: "OPTIONS",
    headers: {
      Origin: origin,
      "Access-Control-Request-Method": "POST",
      "Access-Control-Request-Headers": "content-type,x-grpc-web,x-user-agent,grpc-timeout",
    },
  });
  const h = res.headers;
  return {
    status: res.status,
    allowOrigin: h.get("access-control-allow-origin"),
    allowMethods: h.get("access-control-allow-methods"),
    allowHeaders: h.get("access-control-allow-headers"),
    maxAge: h.get("access-control-max-age"),
    vary: h.get("vary"),
  };
}
out.preflightAllowed = await preflight(cfg.allowedOrigin);
out.preflightRefused = await preflight(cfg.refusedOrigin);

async function callFrom(origin) {
  let seen;
  const withOrigin = (next) => async (req) => {
    req.header.set("Origin", origin);
    const res = await next(req);
    seen = {
      allowOrigin: res.header.get("access-control-allow-origin"),
      exposeHeaders: res.header.get("access-control-expose-headers"),
    };
    return res;
  };
  const c = createClient(ChainService, createGrpcWebTransport({ baseUrl: cfg.baseUrl, interceptors: [withOrigin] }));
  try {
    const res = await c.getNodeStatus({});
    return { ok: true, blockHeight: res.status.blockHeight.toString(), ...seen };
  } catch (e) {
    return { ok: false, ...describeError(e) };
  }
}
out.callAllowed = await callFrom(cfg.allowedOrigin);
out.callRefused = await callFrom(cfg.refusedOrigin);

console.log(JSON.stringify(out));
