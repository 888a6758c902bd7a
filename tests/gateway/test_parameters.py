"""The compiled parameter validation of the reads agrees with openapi-core on every bodiless operation: the
same converted values for valid input, and an error naming the same parameter for invalid input."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openapi_core import Config, OpenAPI
from openapi_core.testing import MockRequest

from gateway.errors import ApiError
from gateway.rest.openapi import build_document
from gateway.rest.routes import ROUTES
from gateway.rest.validation import EMPTY_IS_ABSENT, CompiledOperation, compile_operations, to_api_error
from node.errors import MessageRejected
from node.state.structural import need_project_name

DOCUMENT = build_document(ROUTES)
API = OpenAPI.from_dict(DOCUMENT, config=Config(spec_validator_cls=None))
COMPILED = compile_operations(DOCUMENT, EMPTY_IS_ABSENT)

# Text that each kind of parameter may meet: valid, borderline and invalid.
TEXTS = (
    "0x" + "ab" * 20, "0x" + "AB" * 20, "0x" + "cd" * 32, "0x" + "ab" * 19, "0x" + "zz" * 20, "ab" * 20,
    "726566732f68656164732f6d61696e", "72656", "", "0", "1", "7", "200", "201", "-1", "1.5", str(2**64 - 1),
    str(2**64), "true", "False", "yes", "maybe", "main", "my-project.v2", "a" * 101, "AbC_-9", "a b",
    "0x01" + "ab" * 20,  # a public state key (an account's)
)  # fmt: skip


def by_openapi_core(template: str, path: dict[str, str], query: dict[str, str]) -> tuple[str, Any]:
    url = re.sub(r"\{(\w+)\}", lambda m: path[m.group(1)], template)
    kept = {k: v for k, v in query.items() if v != "" or k not in EMPTY_IS_ABSENT}  # as OpenAPIRequest does
    result = API.unmarshal_request(MockRequest("http://localhost", "get", url, args=kept))
    errors = list(result.errors)
    if errors:
        err = to_api_error(errors[0])
        return "error", (err.status, err.details.get("field"), err.details.get("in"))
    return "ok", (dict(result.parameters.path), dict(result.parameters.query))


def by_compiled(op: CompiledOperation, path: dict[str, str], query: dict[str, str]) -> tuple[str, Any]:
    try:
        inputs = op.inputs(path, query)
    except ApiError as err:
        return "error", (err.status, err.details.get("field"), err.details.get("in"))
    return "ok", (dict(inputs.path), dict(inputs.query))


def test_every_read_is_compiled() -> None:
    reads = {(r.method, r.path) for r in ROUTES if r.body is None}
    assert reads and reads <= set(COMPILED)


@pytest.mark.parametrize(("key"), sorted(COMPILED), ids=lambda k: f"{k[0]} {k[1]}")
def test_compiled_agrees_with_openapi_core(key: tuple[str, str]) -> None:
    op = COMPILED[key]
    path_params = [p for p in op.parameters if p.where == "path"]
    query_params = [p for p in op.parameters if p.where == "query"]
    base = {q.name: _first_valid(op, q.name) for q in path_params}
    compared = 0
    for p in path_params:
        for text in TEXTS:
            if text == "":
                continue  # an empty path segment does not reach the route at all
            path = {**base, p.name: text}
            assert by_compiled(op, path, {}) == by_openapi_core(key[1], path, {}), (p.name, text)
            compared += 1
    for p, text in itertools.product(query_params, TEXTS):
        assert by_compiled(op, base, {p.name: text}) == by_openapi_core(key[1], base, {p.name: text}), (p.name, text)
        compared += 1
    assert by_compiled(op, base, {}) == by_openapi_core(key[1], base, {})
    assert compared == len(TEXTS) * len(query_params) + (len(TEXTS) - 1) * len(path_params)


def _first_valid(op: CompiledOperation, name: str) -> str:
    spec = next(p for p in op.parameters if p.name == name)
    for text in TEXTS:
        try:
            spec.value(text)
        except ApiError:
            continue
        return text
    raise AssertionError(f"no sample text is valid for {name}")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=80))
def test_limit_and_cursor_agree_on_any_text(text: str) -> None:
    key = ("GET", "/v1/accounts/{ownerAddress}/custody-keys")
    path = {"ownerAddress": "0x" + "ab" * 20}
    for name in ("limit", "cursor"):
        assert by_compiled(COMPILED[key], path, {name: text}) == by_openapi_core(key[1], path, {name: text})


@pytest.mark.parametrize(
    "name", ["main", "_x", "9lives", "my-project.v2", "-x", ".x", ".", "", "a b", "a" * 100, "a" * 101]
)
def test_project_names_follow_the_node_rule(name: str) -> None:
    """The gateway refuses a project name exactly when the node's structural check would."""
    try:
        need_project_name("name", name)
        node_accepts = True
    except MessageRejected:
        node_accepts = False
    op = COMPILED[("GET", "/v1/accounts/{ownerAddress}/projects/{name}")]
    outcome, _ = by_compiled(op, {"ownerAddress": "0x" + "ab" * 20, "name": name}, {})
    assert (outcome == "ok") == node_accepts


SAMPLES = ("", "0", "7", "-1", "true", "0x" + "ab" * 20, "0x" + "AB" * 32, "0x" + "ab" * 20 + "\n", "0xzz", "main",
           "refs", "726566", "42-0", "a" * 101, "_x.y-z", "18446744073709551616")  # fmt: skip


def test_fast_accept_accepts_exactly_what_the_validator_accepts() -> None:
    operations = compile_operations(build_document(ROUTES), EMPTY_IS_ABSENT)
    checked = 0
    for op in operations.values():
        for p in op.parameters:
            if p.accept is None:
                continue
            for text in SAMPLES:
                try:
                    value = p.cast(text)
                except ValueError:
                    continue
                assert p.accept(value) == (not list(p.validator.iter_errors(value))), (p.name, text)
                checked += 1
    assert checked > 100
