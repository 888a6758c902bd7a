"""Request validation against the OpenAPI document by openapi-core, for the REST routes' handlers.

Each REST route's handler (gateway/rest/routes.py, `endpoint`) validates its request before it runs; other
routes (SSE streams, the gRPC-web passthrough, the document itself) are left to their owners. A request
that does not match its operation is answered 400 (415 for an unsupported Content-Type) with the error
body naming the field:

    {"error": {"code": "INVALID_ARGUMENT", "message": "Invalid path parameter: ownerAddress",
               "details": {"field": "ownerAddress", "in": "path", "reason": "'0x12' does not match …"}}}

Requests without a body to an operation whose parameters are all path/query scalars (every read) take the
compiled path below (`compile_operations`; same document, same validator library, a thousandth of the
cost), bound to the route when it is added; the rest go through openapi-core's `unmarshal_request`
(`validated`). The parameters themselves, with their schemas, are in gateway/rest/params.py.

Why compiled: openapi-core resolves the document lazily on every request (path matching, then every `$ref`
and keyword through jsonschema-path), which costs 3-5 ms for a GET with one or two parameters: most of a
read's time. A GET's inputs are only its path and query parameters, so at start-up each such operation of the same
document gets, per parameter, a caster from the URL's text to the schema's type (with openapi-core's own
rules: `int()`, its boolean words) and an `OAS31Validator` (openapi-schema-validator, the OAS 3.1 JSON
Schema validator that openapi-core itself uses) for the parameter's schema, with a lean check in front for
the common schemas (`fast_accept`). Errors have the same shape as openapi-core's. Requests with a body
(the writes) still go through openapi-core whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

from aiohttp import web
from multidict import MultiDict
from openapi_core.datatypes import RequestParameters
from openapi_core.deserializing.media_types.exceptions import MediaTypeDeserializeError
from openapi_core.templating.media_types.exceptions import MediaTypeNotFound
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from openapi_core.util import BOOLEAN_FALSE_VALUES, BOOLEAN_TRUE_VALUES
from openapi_core.validation.request.exceptions import (
    MissingRequestBody,
    ParameterValidationError,
    RequestBodyValidationError,
)
from openapi_schema_validator import OAS31Validator

from gateway.errors import ApiError
from gateway.keys import OPENAPI
from gateway.rest.shapes import ONEOF_KEY, Schema
from gateway.rest.table import Inputs
from node.errors import Reason

EMPTY_IS_ABSENT = frozenset({"cursor"})


def _schema_errors(exc: BaseException | None) -> list[Any]:
    return list(getattr(exc, "schema_errors", None) or ())


def _path(error: Any) -> str:
    """Dotted path of the offending body field; for a missing or unexpected property, that property."""
    parts = [str(p) for p in getattr(error, "absolute_path", ())]
    instance = getattr(error, "instance", None)
    if isinstance(instance, dict):
        if error.validator == "required":
            missing = [p for p in error.validator_value if p not in instance]
            parts += missing[:1]
        elif error.validator == "additionalProperties":
            known = set(error.schema.get("properties", {}))
            extra = sorted(k for k in instance if k not in known)
            parts += extra[:1]
    return ".".join(parts)


def to_api_error(error: Exception) -> ApiError:
    """The 400/415 ApiError for one openapi-core validation error, naming the offending field."""
    cause = error.__cause__
    if isinstance(error, ParameterValidationError):
        reasons = [e.message for e in _schema_errors(cause)] or ([str(cause)] if cause else [])
        details: dict[str, Any] = {"field": error.name, "in": error.location}
        if reasons:
            details["reason"] = "; ".join(reasons)
        return ApiError(400, Reason.INVALID_ARGUMENT, str(error), **details)
    if isinstance(error, RequestBodyValidationError):
        if isinstance(cause, MediaTypeNotFound):
            return ApiError(
                415,
                Reason.UNSUPPORTED_MEDIA_TYPE,
                f"Content-Type {cause.mimetype!r} is not accepted here",
                accepted=list(cause.availableMimetypes),
            )
        if isinstance(cause, MediaTypeDeserializeError):
            # (not str(cause): openapi-core formats it by decoding the body as UTF-8, which may fail)
            message = f"the body does not parse as {cause.mimetype}"
            return ApiError(400, Reason.INVALID_ARGUMENT, message, field="body", **{"in": "body"})
        if isinstance(error, MissingRequestBody):
            return ApiError(400, Reason.INVALID_ARGUMENT, "a request body is required", field="body", **{"in": "body"})
        errors = _schema_errors(cause)
        oneof = next((e for e in errors if isinstance(e.schema, dict) and ONEOF_KEY in e.schema), None)
        if oneof is not None:  # the field in error is the oneof itself (several of its members given)
            where = _path(oneof) or "body"
            name = oneof.schema[ONEOF_KEY]
            message = f"invalid request body: {where}: more than one member of oneof {name!r} given"
            return ApiError(400, Reason.INVALID_ARGUMENT, message, field=name, **{"in": "body"})
        if errors:
            first = min(errors, key=lambda e: len(list(getattr(e, "absolute_path", ()))))
            field = _path(first) or "body"
            return ApiError(
                400,
                Reason.INVALID_ARGUMENT,
                f"invalid request body: {field}: {first.message}",
                field=field,
                reason="; ".join(e.message for e in errors),
                **{"in": "body"},
            )
        message = f"invalid request body: {cause or error}"
        return ApiError(400, Reason.INVALID_ARGUMENT, message, field="body", **{"in": "body"})
    if isinstance(error, OperationNotFound):
        return ApiError(405, Reason.METHOD_NOT_ALLOWED, str(error))
    if isinstance(error, PathNotFound):
        return ApiError(404, Reason.NOT_FOUND, str(error))
    return ApiError(400, Reason.INVALID_ARGUMENT, str(error))


class OpenAPIRequest:
    """openapi-core's view of an aiohttp request. An empty `cursor` (`?cursor=`) counts as absent, so a
    `next_cursor` can be passed back as it is (openapi-core refuses empty values otherwise)."""

    def __init__(self, request: web.Request, body: bytes | None) -> None:
        self.request = request
        self.body = body
        query = MultiDict((k, v) for k, v in request.query.items() if v != "" or k not in EMPTY_IS_ABSENT)
        self.parameters = RequestParameters(query=query, header=request.headers, cookie=request.cookies)

    @property
    def host_url(self) -> str:
        return f"{self.request.url.scheme}://{self.request.url.host}"

    @property
    def path(self) -> str:
        return self.request.url.path

    @property
    def method(self) -> str:
        return self.request.method.lower()

    @property
    def content_type(self) -> str:
        return self.request.content_type


async def validated(request: web.Request) -> Inputs:
    """The request's inputs checked by openapi-core against its operation (ApiError when they do not match)."""
    raw = await request.read() if request.body_exists else b""
    result = request.app[OPENAPI].unmarshal_request(OpenAPIRequest(request, raw or None))
    errors = list(result.errors)
    if errors:
        raise to_api_error(errors[0])
    params = result.parameters
    return Inputs(
        path=dict(params.path),
        query=dict(params.query),
        body=result.body,
        raw_body=raw,
        content_type=request.content_type,
    )


Caster = Callable[[str], Any]


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in BOOLEAN_TRUE_VALUES:
        return True
    if lowered in BOOLEAN_FALSE_VALUES:
        return False
    raise ValueError(f"{text!r} is not a boolean")


CASTERS: Mapping[str, Caster] = MappingProxyType({"integer": int, "boolean": _boolean, "string": str})
ANNOTATIONS = frozenset({"type", "description", "examples"})


def fast_accept(schema: Schema) -> Callable[[Any], bool] | None:
    """For the common schemas (a string with a pattern, an integer with bounds, a boolean), a check that
    accepts exactly what the validator accepts, without building its error iterator; a value it refuses
    still goes through the validator, so the error reasons are the validator's own. None for other schemas."""
    kind, keywords = schema.get("type"), set(schema) - ANNOTATIONS
    if kind == "string" and keywords <= {"pattern"}:
        search = re.compile(schema.get("pattern", "")).search  # JSON Schema patterns are unanchored searches
        return lambda v: search(v) is not None
    if kind == "integer" and keywords <= {"minimum", "maximum"}:
        lo, hi = schema.get("minimum"), schema.get("maximum")
        return lambda v: (lo is None or v >= lo) and (hi is None or v <= hi)
    if kind == "boolean" and not keywords:
        return lambda v: True
    return None


@dataclass(frozen=True)
class CompiledParameter:
    name: str
    where: str  # path | query
    required: bool
    cast: Caster
    validator: Any  # OAS31Validator (untyped library)
    accept: Callable[[Any], bool] | None = None  # fast_accept of the schema

    def invalid(self, reason: str) -> ApiError:
        return ApiError(
            400, Reason.INVALID_ARGUMENT, f"Invalid {self.where} parameter: {self.name}",
            field=self.name, reason=reason, **{"in": self.where},
        )  # fmt: skip

    def value(self, text: str) -> Any:
        try:
            value = self.cast(text)
        except ValueError as err:
            raise self.invalid(str(err)) from None
        if self.accept is not None and self.accept(value):
            return value
        errors = sorted(self.validator.iter_errors(value), key=lambda e: e.path)
        if errors:
            raise self.invalid("; ".join(e.message for e in errors))
        return value


def compile_parameter(spec: Schema, document: Schema) -> CompiledParameter:
    schema = spec["schema"]
    kind = schema.get("type")
    if kind not in CASTERS:
        raise ValueError(f"parameter {spec['name']}: no fast caster for type {kind!r}")
    resolver_root = {**schema, "components": document.get("components", {})}
    return CompiledParameter(
        name=spec["name"],
        where=spec["in"],
        required=bool(spec.get("required")),
        cast=CASTERS[kind],
        validator=OAS31Validator(resolver_root),
        accept=fast_accept(schema),
    )


@dataclass(frozen=True)
class CompiledOperation:
    """The parameters of one bodiless operation; `inputs()` is what openapi-core would have produced."""

    parameters: tuple[CompiledParameter, ...]
    empty_is_absent: frozenset[str]

    @cached_property
    def reads_query(self) -> bool:
        """Has it query parameters? (If not, `inputs` never looks at the query: the caller need not parse it.)"""
        return any(p.where == "query" for p in self.parameters)

    def inputs(self, path: Mapping[str, str], query: Mapping[str, str]) -> Inputs:
        values: dict[str, dict[str, Any]] = {"path": {}, "query": {}}
        for p in self.parameters:
            text = (path if p.where == "path" else query).get(p.name)
            if text is None or (text == "" and p.name in self.empty_is_absent):
                if p.required:
                    raise ApiError(
                        400, Reason.INVALID_ARGUMENT, f"Missing required {p.where} parameter: {p.name}",
                        field=p.name, **{"in": p.where},
                    )  # fmt: skip
                continue
            values[p.where][p.name] = p.value(text)
        return Inputs(path=values["path"], query=values["query"])


def compile_operations(document: Schema, empty_is_absent: frozenset[str]) -> dict[tuple[str, str], CompiledOperation]:
    """(METHOD, path template) → compiled parameters, for every operation that takes no body and whose
    parameters are all path or query scalars; other operations are left to openapi-core."""
    out: dict[tuple[str, str], CompiledOperation] = {}
    for path, item in document.get("paths", {}).items():
        for method, op in item.items():
            if not isinstance(op, dict) or "requestBody" in op:
                continue
            specs = op.get("parameters", [])
            if any(s["in"] not in ("path", "query") or s["schema"].get("type") not in CASTERS for s in specs):
                continue
            compiled = tuple(compile_parameter(s, document) for s in specs)
            out[(method.upper(), path)] = CompiledOperation(compiled, empty_is_absent)
    return out
