"""The OpenAPI document: a valid OpenAPI 3.1 document that describes exactly the routes served, covers every
read RPC, and that the real gateway honours under schemathesis (no 5xx, no answer outside its schema)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, Phase, given, settings
from openapi_spec_validator import validate
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

# schemathesis imports its OpenAPI loader only when a schema is first loaded (in the fixture below), and
# pytest parses its modules then to rewrite their asserts. On CPython 3.11 an `ast.parse` that runs while
# another is in progress in the same thread (a traceback formatted by a finalizer the garbage collector
# calls, e.g. asyncio's "Task exception was never retrieved") breaks the outer one with "SystemError: AST
# constructor recursion depth mismatch" (python/cpython#106905). A clean clone lost this module's 81 tests
# to it: a failed test elsewhere had left tasks whose errors were logged during this fixture's import.
# Imported here, the loader is parsed at collection, before any test runs.
from schemathesis.specs.openapi import schemas as _loaded_at_collection  # noqa: F401
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from chain.v1 import keychain_service_pb2, service_pb2
from gateway.app import build_app
from gateway.config import GatewayConfig
from gateway.keys import DOCUMENT
from gateway.rest.openapi import build_document
from gateway.rest.routes import ROUTES
from tests.fixtures.actors import new_account
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess

METHODS = {"get", "post", "put", "patch", "delete"}
# Examples per operation and generation mode: `make test` runs the first, `make soak` the second.
EXAMPLES = {GenerationMode.POSITIVE: 200, GenerationMode.NEGATIVE: 50}
SOAK_EXAMPLES = {GenerationMode.POSITIVE: 2000, GenerationMode.NEGATIVE: 500}
SPEC_ROUTES = [
    "/v1/accounts/{ownerAddress}",
    "/v1/accounts/{ownerAddress}/custody-keys",
    "/v1/accounts/{ownerAddress}/custody-keys/{key_id}",
    "/v1/projects/{projectId}/merge-requests",
    "/v1/projects/{projectId}/merge-requests/{requestId}",
    "/v1/accounts/{ownerAddress}/merge-requests",
]


@pytest.fixture(scope="module")
def app_and_document() -> tuple[web.Application, dict[str, Any]]:
    app = build_app(GatewayConfig())
    return app, app[DOCUMENT]


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield path, method, op


def test_document_is_valid_openapi_3_1(app_and_document: tuple[web.Application, dict[str, Any]]) -> None:
    _, doc = app_and_document
    assert doc["openapi"] == "3.1.0"
    validate(doc)  # openapi-spec-validator: the OpenAPI 3.1 meta-schema and reference resolution
    ids = [op["operationId"] for _, _, op in operations(doc)]
    assert len(ids) == len(set(ids))


def test_document_describes_exactly_the_routes_served(app_and_document: tuple[web.Application, dict[str, Any]]) -> None:
    app, doc = app_and_document
    served = set()
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        path = info.get("path") or info.get("formatter")
        # HEAD beside each GET, and a fixed path's refusal of the methods it does not serve (405): no operations
        if route.method not in ("HEAD", "*") and path and path.startswith("/v1/"):
            served.add((path, route.method.lower()))
    documented = {(path, method) for path, method, _ in operations(doc)}
    sse = {("/v1/events/messages", "get"), ("/v1/events/blocks", "get")}  # served by gateway.events
    assert served - sse == documented - sse
    for path in SPEC_ROUTES:
        assert "get" in doc["paths"][path], path
    assert {(r.path, r.method.lower()) for r in ROUTES} <= documented
    assert "/v1/grpc-web/{service}/{method}" in doc["paths"]


def test_every_read_rpc_has_a_route(app_and_document: tuple[web.Application, dict[str, Any]]) -> None:
    _, doc = app_and_document
    named = set()
    for _, _, op in operations(doc):
        named |= set(re.findall(r"\((\w+)\)", op["summary"]))
    rpcs = {m.name for m in service_pb2.DESCRIPTOR.services_by_name["ChainService"].methods}
    rpcs |= {m.name for m in keychain_service_pb2.DESCRIPTOR.services_by_name["KeychainService"].methods} - {
        "ListCustodyKeys",
        "GetCustodyKey",
    }
    assert rpcs - named == set()  # SubscribeMessages/SubscribeBlocks: the SSE operations
    assert "SubmitMessage" in named and "BatchSubmitMessages" in named and "DryRunMessage" in named


def test_event_streams_are_documented(app_and_document: tuple[web.Application, dict[str, Any]]) -> None:
    _, doc = app_and_document
    for path, extra in (("/v1/events/messages", {"project_id", "types"}), ("/v1/events/blocks", set())):
        op = doc["paths"][path]["get"]
        assert "text/event-stream" in op["responses"]["200"]["content"]
        names = {(p["name"], p["in"]) for p in op["parameters"]}
        assert {("last_event_id", "query"), ("Last-Event-ID", "header")} <= names
        assert {(n, "query") for n in extra} <= names


def test_shapes_follow_the_address_native_rules(app_and_document: tuple[web.Application, dict[str, Any]]) -> None:
    _, doc = app_and_document
    schemas = doc["components"]["schemas"]
    custody = schemas["CustodyKey"]
    assert set(custody["properties"]) == {
        "key_id", "signature_type", "public_key", "admin", "expires_at", "added_at", "revoked_at", "status"
    }  # fmt: skip
    assert custody["properties"]["expires_at"]["type"] == "string"
    assert custody["properties"]["added_at"]["type"] == "integer"
    assert custody["properties"]["signature_type"]["type"] == "integer"
    assert custody["properties"]["status"]["enum"] == ["unspecified", "active", "revoked"]
    assert schemas["AccountSummary"]["properties"]["custody_nonce"]["type"] == "string"
    assert "custody_keys" in schemas["AccountSummary"]["required"]
    mr = schemas["MergeRequest"]["properties"]
    assert mr["source_ref"]["pattern"] == mr["target_ref"]["pattern"] == "^([0-9a-f]{2})*$"
    assert "requester_owner_address" in mr and "source_project_id" in mr
    for name in ("Project", "Collaborator", "RefLogEntry", "Ref", "Link", "Reaction", "KeyEntry", "Verification"):
        assert "owner_address" in schemas[name]["properties"], name
    assert "author_address" in schemas["Commit"]["properties"]
    assert "target_owner_address" in schemas["Link"]["properties"]
    params = {p["name"] for _, _, op in operations(doc) for p in op.get("parameters", []) if p["in"] == "query"}
    assert {"owner_address", "target_owner_address", "limit", "cursor"} <= params
    assert not params & {"fid", "owner", "user", "username"}


# ---- schemathesis against the real chain-gateway process ----
# schemathesis' lazy pytest loader (`schemathesis.pytest.from_fixture`) does not run under pytest 9 (it
# reads `Function._nodeid`), so the operations are parametrized here from the document (which is built
# without a server) and each one runs schemathesis' Hypothesis strategy against the live gateway.


def conforms_to_documented_rules(case: Any) -> bool:
    """Whether a request the generator drew as valid also keeps what the document says beyond JSON Schema:
    `x-exactly-one-of` (one of those query parameters, not none, not both) and `x-opaque` parameters (only a
    value the service handed out: a drawn non-empty one is not known to be valid)."""
    op = case.operation.definition.raw
    query = case.query or {}
    for group in op.get("x-exactly-one-of", []):
        if sum(1 for name in group if query.get(name) not in (None, "")) != 1:
            return False
    opaque = {p["name"] for p in op.get("parameters", []) if p.get("x-opaque")}
    return not any(query.get(name) not in (None, "") for name in opaque)


@schemathesis.check
def valid_but_refused(ctx: Any, response: Any, case: Any) -> bool | None:
    """A request valid by the document is never refused by form: no 400 `INVALID_ARGUMENT` (the code of every
    refusal of a parameter's or body's form, by the gateway's validation or by the node). Other 400 codes
    are the node judging content no schema can (a signature, a nonce) and stay allowed."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 400:
        return None
    if not conforms_to_documented_rules(case):
        return None
    error = response.json().get("error", {})
    if error.get("code") == "INVALID_ARGUMENT":
        raise AssertionError(f"valid by the document but refused: {error}")
    return None


CHECKS = [
    valid_but_refused,
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
POSITIVE, NEGATIVE = GenerationMode.POSITIVE, GenerationMode.NEGATIVE
FUZZED = [
    (path, method.upper(), mode)
    for path, method, op in operations(build_document(ROUTES))
    if not path.startswith(("/v1/events/", "/v1/grpc-web/"))
    for mode in (POSITIVE, NEGATIVE)
    if mode == POSITIVE or op.get("parameters") or op.get("requestBody")  # nothing to break otherwise
]


@pytest.fixture(scope="module")
def api_schema(node: NodeProcess, gateway: GatewayProcess) -> Any:
    c = node.client()
    new_account(c, node.authority())  # some state besides the devnet authority
    c.close()
    config = schemathesis.Config()
    config.projects.default.update(base_url=gateway.url, request_timeout=10)
    config.projects.default.generation.update(allow_x00=False)
    return schemathesis.openapi.from_url(gateway.url + "/v1/openapi.json", config=config)


IDS = [f"{m} {p} {g.value}" for p, m, g in FUZZED]


@pytest.mark.parametrize(("path", "method", "mode"), FUZZED, ids=IDS)
def test_gateway_honours_its_document(api_schema: Any, path: str, method: str, mode: GenerationMode) -> None:
    fuzz(api_schema[path][method], mode, EXAMPLES[mode])


@pytest.mark.soak
@pytest.mark.parametrize(("path", "method", "mode"), FUZZED, ids=IDS)
def test_gateway_honours_its_document_soak(api_schema: Any, path: str, method: str, mode: GenerationMode) -> None:
    fuzz(api_schema[path][method], mode, SOAK_EXAMPLES[mode])


def fuzz(operation: Any, mode: GenerationMode, examples: int) -> None:
    """`examples` requests drawn by schemathesis for `operation` in `mode`, each answer checked by CHECKS."""
    session = requests.Session()

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    def run(case: Any) -> None:
        case.call_and_validate(session=session, checks=CHECKS)

    run()
