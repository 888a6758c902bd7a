"""Request validation against the OpenAPI document by openapi-core, for the REST routes' handlers.

Each REST route's handler (gateway/rest/routes.py, `endpoint`) validates its request before it runs; other
routes (SSE streams, the gRPC-web passthrough, the document itself) are left to their owners. A request
that does not match its operation is answered 400 (415 for an unsupported Content-Type) with the error
body naming the field:

    {"error": {"code": "INVALID_ARGUMENT", "message": "Invalid path parameter: ownerAddress",
               "details": {"field": "ownerAddress", "in": "path", "reason": "'0x12' does not match …"}}}

Requests without a body to an operation whose parameters are all path/query scalars (every read) take the
compiled path of `gateway.rest.parameters` (same document, same validator library, a thousandth of the
cost), bound to the route when it is added; the rest go through openapi-core's `unmarshal_request`
(`validated`).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from multidict import MultiDict
from openapi_core.datatypes import RequestParameters
from openapi_core.deserializing.media_types.exceptions import MediaTypeDeserializeError
from openapi_core.templating.media_types.exceptions import MediaTypeNotFound
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from openapi_core.validation.request.exceptions import (
    MissingRequestBody,
    ParameterValidationError,
    RequestBodyValidationError,
)

from gateway.errors import ApiError
from gateway.keys import OPENAPI
from gateway.rest.shapes import ONEOF_KEY
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
