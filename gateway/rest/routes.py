"""REST routes under /v1: the route table, the OpenAPI document and its request validation, the error
middleware, CORS and the gRPC-web passthrough.

    setup_rest(app)   # called by gateway.app.build_app

Middlewares, outermost first: CORS preflight → errors (every failure to the JSON error body). Routing is
aiohttp's own router. Each REST route's handler validates its request against the OpenAPI document first (a
compiled check bound to the route for the bodiless ones, gateway/rest/validation.py otherwise). A fixed
path (one without a template) answers a method it does not serve with 405 naming its methods, through a
catch-all route registered after the path's own routes. See docs/rest.md.
"""

from __future__ import annotations

from aiohttp import hdrs, web
from openapi_core import Config, OpenAPI

from gateway.errors import Handler, setup_errors
from gateway.keys import DOCUMENT, NODES, OPENAPI
from gateway.rest import accounts, chain, projects, writes
from gateway.rest.cors import setup_cors
from gateway.rest.grpcweb import setup_grpc_web
from gateway.rest.openapi import OPENAPI_PATH, build_document
from gateway.rest.table import NO_VALUES, Call, Route
from gateway.rest.validation import EMPTY_IS_ABSENT, CompiledOperation, compile_operations, validated

ROUTES: tuple[Route, ...] = (*accounts.ROUTES, *projects.ROUTES, *chain.ROUTES, *writes.ROUTES)


def served_methods(route: Route) -> tuple[str, ...]:
    """The route's method, and HEAD beside a GET (RFC 9110): the GET's answer with its body left unsent."""
    return (route.method, "HEAD") if route.method == "GET" else (route.method,)


def fixed_paths(routes: tuple[Route, ...]) -> dict[str, frozenset[str]]:
    """Template-free paths and their methods (`/v1/messages/batch`: POST), which a template beside them
    (`/v1/messages/{hash}`) would otherwise also match."""
    out: dict[str, set[str]] = {}
    for route in routes:
        if "{" not in route.path:
            out.setdefault(route.path, set()).update(served_methods(route))
    return {path: frozenset(methods) for path, methods in out.items()}


FIXED = fixed_paths(ROUTES)


def refusal(methods: frozenset[str]) -> Handler:
    """The handler of every other method on a fixed path: 405 naming the methods the path serves. Registered
    after the path's own routes, so aiohttp reaches it before any template that matches the same text
    (`GET /v1/messages/batch` is not routed to `/v1/messages/{hash}`)."""
    allowed = sorted(methods)

    async def refuse(request: web.Request) -> web.StreamResponse:
        raise web.HTTPMethodNotAllowed(request.method, allowed)

    return refuse


def endpoint(route: Route, compiled: CompiledOperation | None) -> Handler:
    """The route's aiohttp handler: its inputs validated (`compiled`: the operation's compiled parameters,
    when it has them), the route's handler, its answer as JSON. Validation here rather than in a
    middleware: no per-request lookup of the route's operation, one coroutine frame less."""

    async def handle(request: web.Request) -> web.StreamResponse:
        if compiled is not None and not request.body_exists:
            inputs = compiled.inputs(request.match_info, request.query if compiled.reads_query else NO_VALUES)
        else:
            inputs = await validated(request)
        return await route.handler(Call(request, request.app[NODES], inputs, route.status))

    handle.__name__ = route.operation_id
    return handle


async def serve_document(request: web.Request) -> web.Response:
    return web.json_response(request.app[DOCUMENT])


def setup_rest(app: web.Application) -> None:
    """Register the REST routes, OpenAPI document and validation, error middleware, gRPC-web passthrough."""
    document = build_document(ROUTES)
    app[DOCUMENT] = document
    # The document is checked against the OpenAPI 3.1 meta-schema by the tests (tests/gateway/test_openapi.py);
    # skipping the check here saves a second and a half per start.
    app[OPENAPI] = OpenAPI.from_dict(document, config=Config(spec_validator_cls=None))
    compiled = compile_operations(document, EMPTY_IS_ABSENT)  # kept only by the routes' handlers
    setup_cors(app)
    setup_errors(app)
    for route in ROUTES:
        handler = endpoint(route, compiled.get((route.method, route.path)))
        for method in served_methods(route):  # one resource per route: the same name and path
            app.router.add_route(method, route.path, handler, name=route.name)
    for path, methods in FIXED.items():  # after every route of the path: aiohttp tries resources in order
        app.router.add_route(hdrs.METH_ANY, path, refusal(methods))
    app.router.add_get(OPENAPI_PATH, serve_document, name="openapi.document")  # with HEAD
    setup_grpc_web(app)
