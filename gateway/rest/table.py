"""The route table's vocabulary: a `Route` names its method, path, parameters, body, response schema and
handler; the same entry registers the aiohttp route and writes its OpenAPI operation, so the document
cannot drift from what is served.

Handlers receive a `Call`: the node pool and the request's inputs as validated and converted by the
OpenAPI request validation (`Inputs`), never the raw query string.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

import grpc
import orjson
from aiohttp import hdrs, web
from google.protobuf.message import Message

from gateway.errors import invalid_argument
from gateway.keys import BODIES
from gateway.rest.memo import Shaped
from gateway.rest.shapes import Json, Schema, SchemaFragment, ref
from gateway.upstream import NodePool, Read, Upstream
from gateway.upstream.batching import Metadata, height_of
from node.constants import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from node.errors import CHAIN_MIN_HEIGHT, CHAIN_READ_CONSISTENCY

T = TypeVar("T")
M = TypeVar("M", bound=Message)
HEIGHT_HEADER = "Chain-Height"  # the applied height a read's answer reflects (the node's `chain-height`)
# the consistency a read may ask for: the request header and the node call's metadata of the same name
WISH_HEADERS = (("Chain-Min-Height", CHAIN_MIN_HEIGHT), ("Chain-Read-Consistency", CHAIN_READ_CONSISTENCY))
HEIGHT_KEY = web.RequestKey("chain_height", str)  # the height of the stub read `Call.read` made


@dataclass(frozen=True)
class Param:
    name: str
    where: str  # path | query | header
    schema: SchemaFragment
    description: str
    required: bool = False
    style: str | None = None
    explode: bool | None = None
    # Only values the service handed out are accepted (a cursor): no schema can say which (`x-opaque`).
    opaque: bool = False

    def openapi(self) -> Schema:
        out: Schema = {
            "name": self.name,
            "in": self.where,
            "required": self.required or self.where == "path",
            "description": self.description,
            "schema": dict(self.schema),
        }
        if self.style is not None:
            out["style"] = self.style
        if self.explode is not None:
            out["explode"] = self.explode
        if self.opaque:
            out["x-opaque"] = True
        return out


NO_VALUES: Mapping[str, Any] = MappingProxyType({})  # no parameters (shared: read-only)
JSON_TYPE = "application/json; charset=utf-8"


def json_body(body: bytes, status: int = 200, height: str = "") -> web.Response:
    """A JSON answer of serialised `body`; with `height`, the `Chain-Height` it was read at. The
    Content-Type header is given whole (what `content_type=…, charset=…` would build, without building it)."""
    if height:
        return web.Response(body=body, status=status, headers={hdrs.CONTENT_TYPE: JSON_TYPE, HEIGHT_HEADER: height})
    return web.Response(body=body, status=status, headers={hdrs.CONTENT_TYPE: JSON_TYPE})


def wish_of(headers: Mapping[str, str]) -> Metadata:
    """The consistency a request asks for (`Chain-Min-Height`, `Chain-Read-Consistency`) as the metadata of
    its node call; the node checks the values (INVALID_ARGUMENT naming the header), the gateway only that
    they can be sent (printable ASCII)."""
    out: Metadata = ()
    for header, name in WISH_HEADERS:
        value = headers.get(header)
        if value is not None:
            if not (value.isascii() and value.isprintable()):
                raise invalid_argument(name, f"{header} must be printable ASCII", **{"in": "header"})
            out += ((name, value),)
    return out


class Inputs(NamedTuple):
    """Parameters and body of one request after validation (openapi-core's unmarshalled values). A named
    tuple: immutable, and made per request at a tuple's cost (a frozen dataclass took ~2 µs per GET)."""

    path: Mapping[str, Any] = NO_VALUES
    query: Mapping[str, Any] = NO_VALUES
    body: Any = None
    raw_body: bytes = b""
    content_type: str = ""

    def get(self, name: str) -> Any:
        if name in self.path:
            return self.path[name]
        return self.query.get(name)

    def text(self, name: str, default: str = "") -> str:
        value = self.get(name)
        return default if value is None else str(value)

    def hex(self, name: str) -> bytes:
        """A hex parameter (0x-prefixed or not: the OpenAPI pattern has decided which) as bytes."""
        value = self.text(name)
        return bytes.fromhex(value[2:] if value[:2] in ("0x", "0X") else value)

    def integer(self, name: str, default: int = 0) -> int:
        value = self.get(name)
        return default if value is None else int(value)

    def flag(self, name: str) -> bool:
        return bool(self.get(name))

    def page(self) -> dict[str, Any]:
        """`limit` (capped at 200, never an error) and `cursor` as the RPC's page_size and page_token."""
        limit = self.integer("limit", DEFAULT_PAGE_SIZE) or DEFAULT_PAGE_SIZE
        return {"page_size": min(limit, MAX_PAGE_SIZE), "page_token": self.text("cursor")}


class Call(NamedTuple):
    """A route handler's request: its node pool, validated inputs and the route's success status (a named
    tuple: one per request). A handler answers with a `web.Response`: `answer` for a read by method path
    (its body made from the node's answer bytes, or remembered), `json` for any other JSON value."""

    request: web.Request
    nodes: NodePool
    inputs: Inputs
    status: int = 200

    @property
    def timeout(self) -> float:
        return self.nodes.timeout

    async def read(self, rpc: Callable[[Upstream, float], Awaitable[T]]) -> T:
        """A read through a stub of the next public node (retried on another node when one is UNAVAILABLE);
        the `chain-height` its call named is kept for `json`'s `Chain-Height`."""
        made: list[object] = []

        def kept(upstream: Upstream, timeout: float) -> Awaitable[T]:
            made.append(call := rpc(upstream, timeout))
            return call

        out = await self.nodes.read(kept)
        if made and isinstance(made[-1], grpc.aio.Call):
            self.request[HEIGHT_KEY] = height_of(await made[-1].trailing_metadata())
        return out

    async def fetch(self, rpc: Read[M], request: Message) -> M:
        """A read by method path, coalesced with the reads of the same loop turn on a node's internal listener
        (gateway/upstream/batching.py), or a plain call without one; at the consistency the request asked."""
        raw, _height = await self.nodes.fetch_answer(
            rpc.path, request.SerializeToString(), wish_of(self.request.headers)
        )
        return rpc.response.FromString(raw)

    async def answer(self, shaped: Shaped[M], request: Message) -> web.Response:
        """`fetch` answered with its REST body, made from the node's answer or remembered from the same
        answer before (gateway/rest/memo.py), and the height it was read at (`Chain-Height`)."""
        wish = wish_of(self.request.headers)
        raw, height = await self.nodes.fetch_answer(shaped.read.path, request.SerializeToString(), wish)
        return json_body(self.request.app[BODIES].body(shaped, raw), height=height)

    async def write(self, rpc: Callable[[Upstream, float], Awaitable[T]]) -> T:
        """A write RPC (never retried)."""
        return await self.nodes.write(rpc)

    def json(self, value: Json) -> web.Response:
        """`value` as the JSON answer with the route's status, serialised by orjson (compact, UTF-8), and the
        `Chain-Height` of the read it came from (`read`), if any."""
        return json_body(orjson.dumps(value), self.status, self.request.get(HEIGHT_KEY, ""))


# Every REST handler: the request in, the response out.
Handler = Callable[[Call], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Body:
    """A request body: a JSON schema and other accepted media types (with an optional schema each)."""

    json_schema: Schema
    description: str
    other: Mapping[str, Schema] = field(default_factory=dict)

    def openapi(self) -> Schema:
        content: Schema = {"application/json": {"schema": self.json_schema}}
        for media, schema in self.other.items():
            content[media] = {"schema": schema} if schema else {}
        return {"required": True, "description": self.description, "content": content}


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    operation_id: str
    tag: str
    summary: str
    handler: Handler
    response: Schema
    params: tuple[Param, ...] = ()
    body: Body | None = None
    status: int = 200
    description: str = ""
    errors: tuple[int, ...] = (400,)
    extra_responses: Mapping[int, tuple[str, Schema]] = field(default_factory=dict)
    # Query parameters of which a request gives exactly one (`x-exactly-one-of`; 400 otherwise).
    exactly_one_of: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return "rest." + self.operation_id


def page_schema(items_field: str, item: str) -> Schema:
    return {
        "type": "object",
        "properties": {
            items_field: {"type": "array", "items": ref(item)},
            "next_cursor": {
                "type": "string",
                "description": 'pass as `cursor` for the next page; "" on the last page',
            },
        },
        "required": [items_field, "next_cursor"],
        "additionalProperties": False,
    }
