"""Parameter validation compiled once per operation, for the REST reads (operations with no request body).

openapi-core resolves the document lazily on every request (path matching, then every `$ref` and keyword
through jsonschema-path), which costs 3-5 ms for a GET with one or two parameters: most of a read's time.
A GET's inputs are only its path and query parameters, so at start-up each such operation of the same
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

from openapi_core.util import BOOLEAN_FALSE_VALUES, BOOLEAN_TRUE_VALUES
from openapi_schema_validator import OAS31Validator

from gateway.errors import ApiError
from gateway.rest.shapes import Schema
from gateway.rest.table import Inputs
from node.errors import Reason

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
