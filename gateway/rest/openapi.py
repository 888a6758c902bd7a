"""The OpenAPI 3.1 document served at `/v1/openapi.json`, built from the route table.

Every REST route, its parameters, body and responses come from the same `Route` entries that register the
handlers, and every response schema from `shapes`, which also produces the responses: the document
describes what is served. It also describes the SSE streams (served by `gateway.events`) and the gRPC-web
passthrough, so there is one document for the whole gateway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from gateway.protocol import MAX_HEADER_FIELD, MAX_REQUEST_LINE
from gateway.rest import shapes
from gateway.rest.params import HASH32, UINT64
from gateway.rest.shapes import Schema, SchemaFragment, ref
from gateway.rest.table import Param, Route

VERSION = "1.0.0"
OPENAPI_PATH = "/v1/openapi.json"
GRPC_WEB_PATH = "/v1/grpc-web/{service}/{method}"
GRPC_WEB_TYPES = (
    "application/grpc-web",
    "application/grpc-web+proto",
    "application/grpc-web-text",
    "application/grpc-web-text+proto",
)

DESCRIPTION = f"""\
REST gateway of the chain service. All responses are JSON (SSE streams excepted); identities are
`owner_address` values (0x-prefixed 20-byte addresses). Bytes are 0x-prefixed lower-case hex, except ref
names, which are plain hex so that names that are not valid UTF-8 survive a round trip. 64-bit integers are
decimal strings. Lists take `limit` (50 by default, capped at 200) and `cursor`, and return `next_cursor`
("" on the last page). Errors: `{{"error": {{"code", "message", "details"}}}}` with the node's reason code.
Writes accept a signed `chain.v1.Message` in the protobuf JSON mapping or as binary protobuf
(`application/x-protobuf`); in JSON, each bytes field takes 0x-prefixed hex (the form reads show) or base64,
as its schema says (`x-bytes-encoding`), and a value that is 0x and hex digits is always hex. A URL over
{MAX_REQUEST_LINE} bytes is 414 `URI_TOO_LONG`, a header over {MAX_HEADER_FIELD} bytes 431 `HEADERS_TOO_LARGE`.
See docs/rest.md."""

ERROR_DESCRIPTIONS: Mapping[int, str] = MappingProxyType(
    {
        400: "invalid input (the field is named in `details.field`) or a message the node refuses as invalid",
        401: "unauthenticated",
        403: "permission denied (e.g. UNKNOWN_SIGNER, CUSTODY_KEY_REVOKED); CORS preflight refused",
        404: "not found",
        409: "conflict with current state (FAILED_PRECONDITION, ALREADY_EXISTS: e.g. NONCE_MISMATCH, NAME_TAKEN)",
        413: "request too large (MESSAGE_TOO_LARGE, BATCH_TOO_LARGE, body over --max-body-bytes)",
        414: f"URI_TOO_LONG: the request line (method, URL, version) is over {MAX_REQUEST_LINE} bytes",
        415: "unsupported Content-Type",
        429: "resource exhausted (MEMPOOL_FULL, QUOTA_EXCEEDED, NO_STORAGE, LIMIT_EXCEEDED)",
        431: f"HEADERS_TOO_LARGE: a request header is over {MAX_HEADER_FIELD} bytes, or there are too many",
        503: "no node available",
        504: "the node did not answer in time",
    }
)
COMMON_ERRORS = (414, 431, 503, 504)  # every operation: the HTTP parser's limits and the node's availability


def error_schema() -> Schema:
    return {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "stable reason code, e.g. NOT_FOUND, NONCE_MISMATCH"},
                    "message": {"type": "string"},
                    "details": {"type": "object", "description": "values that caused the error, e.g. `field`"},
                },
                "required": ["code", "message", "details"],
                "additionalProperties": False,
            }
        },
        "required": ["error"],
        "additionalProperties": False,
    }


def _json(description: str, schema: Schema) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(status: int) -> Schema:
    return _json(ERROR_DESCRIPTIONS.get(status, "error"), ref("Error"))


def operation(route: Route) -> Schema:
    responses: Schema = {str(route.status): _json("success", route.response)}
    for status in sorted({*route.errors, *COMMON_ERRORS}):
        responses[str(status)] = _error(status)
    for status, (description, schema) in route.extra_responses.items():
        responses[str(status)] = _json(description, schema)
    responses["default"] = _json("any other error", ref("Error"))
    op: Schema = {
        "operationId": route.operation_id,
        "tags": [route.tag],
        "summary": route.summary,
        "parameters": [p.openapi() for p in route.params],
        "responses": responses,
    }
    if route.description:
        op["description"] = route.description
    if route.exactly_one_of:
        op["x-exactly-one-of"] = [list(route.exactly_one_of)]
    if route.body is not None:
        op["requestBody"] = route.body.openapi()
    return op


def _event_stream(description: str) -> Schema:
    return {"description": description, "content": {"text/event-stream": {"schema": {"type": "string"}}}}


EVENT_ID: SchemaFragment = MappingProxyType(
    {"type": "string", "pattern": "^[0-9]{1,20}-[0-9]{1,10}$", "examples": ["42-0"]}
)
LAST_EVENT_ID_HEADER = Param(
    "Last-Event-ID", "header", EVENT_ID, "resume after this event id, `<block>-<index>` (EventSource sends it)"
)
LAST_EVENT_ID_QUERY = Param(
    "last_event_id", "query", EVENT_ID, "resume after this event id (for clients that cannot set headers)"
)
FROM_BLOCK = Param(
    "from_block", "query", {"type": "integer", "minimum": 1, "maximum": UINT64["maximum"]}, "start at this block"
)


def event_operations() -> dict[str, Schema]:
    """The SSE streams (served by gateway.events, see docs/events.md), described here so that the gateway has
    one document. Their parameters are checked by gateway.events, not by the REST validation middleware."""
    common = [LAST_EVENT_ID_QUERY.openapi(), LAST_EVENT_ID_HEADER.openapi(), FROM_BLOCK.openapi()]
    messages_params = [
        Param("project_id", "query", HASH32, "only messages of this project").openapi(),
        Param(
            "types",
            "query",
            {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z_]+$"}},
            "only these message types, comma-separated or repeated (e.g. COMMIT_BUNDLE,REF_UPDATE)",
            style="form",
            explode=False,
        ).openapi(),
        *common,
    ]
    errors = {
        "400": _error(400),
        "429": _json("too many open streams from this client address", ref("Error")),
        "503": _error(503),
        "default": _json("any other error", ref("Error")),
    }
    stream = _event_stream("an SSE stream; every event has an `id:` line (`<block>-<index>`) for resuming")
    return {
        "/v1/events/messages": {
            "get": {
                "operationId": "streamMessages",
                "tags": ["events"],
                "summary": "Committed messages as server-sent events (SubscribeMessages)",
                "parameters": messages_params,
                "responses": {"200": stream, **errors},
            }
        },
        "/v1/events/blocks": {
            "get": {
                "operationId": "streamBlocks",
                "tags": ["events"],
                "summary": "Committed blocks as server-sent events (SubscribeBlocks)",
                "parameters": common,
                "responses": {"200": stream, **errors},
            }
        },
    }


def grpc_web_operation() -> Schema:
    binary: Schema = {media: {} for media in GRPC_WEB_TYPES}
    return {
        "post": {
            "operationId": "grpcWebPassthrough",
            "tags": ["grpc-web"],
            "summary": "gRPC-web passthrough to the node (e.g. /v1/grpc-web/chain.v1.ChainService/GetNodeStatus)",
            "description": (
                "The body (gRPC-web frames, binary or base64 text mode) is forwarded unchanged to the node's "
                "gRPC-web listener (`--node-web-url`) and its answer is streamed back unchanged, chunk by "
                "chunk: errors arrive as `grpc-status` trailers with HTTP 200, as gRPC-web specifies."
            ),
            "parameters": [
                Param(
                    "service", "path", {"type": "string", "pattern": "^[A-Za-z0-9_.]+$"}, "e.g. chain.v1.ChainService"
                ).openapi(),
                Param(
                    "method", "path", {"type": "string", "pattern": "^[A-Za-z0-9_]+$"}, "e.g. GetNodeStatus"
                ).openapi(),
            ],
            "requestBody": {"required": True, "content": binary},
            "responses": {
                "200": {"description": "the node's gRPC-web answer", "content": binary},
                "503": _error(503),
                "default": _json("any other error", ref("Error")),
            },
        }
    }


def build_document(routes: Iterable[Route]) -> Schema:
    paths: Schema = {}
    tags: list[str] = []
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = operation(route)
        if route.tag not in tags:
            tags.append(route.tag)
    paths[OPENAPI_PATH] = {
        "get": {
            "operationId": "getOpenApiDocument",
            "tags": ["meta"],
            "summary": "This document",
            "responses": {"200": _json("the OpenAPI 3.1 document", {"type": "object"})},
        }
    }
    paths.update(event_operations())
    paths[GRPC_WEB_PATH] = grpc_web_operation()
    schemas = shapes.schema_components()
    schemas["Error"] = error_schema()
    return {
        "openapi": "3.1.0",
        "info": {"title": "Chain REST gateway", "version": VERSION, "description": DESCRIPTION},
        "servers": [{"url": "/"}],
        "tags": [{"name": t} for t in [*tags, "events", "grpc-web", "meta"]],
        "paths": paths,
        "components": {"schemas": schemas},
    }
