"""The filter language as the OpenAPI schema documents it. Requests carry it as JSON and the engine parses it
(indexing/filters.py), so that every fault, of shape or of type, gets one 422 naming its JSON path."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 256,
    "description": "a metadata field; a nested one by its dotted path (`author.name`, `refs[].year`)",
}
_SCALAR = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}]}
_BOUND = {"anyOf": [{"type": "number"}, {"type": "string", "format": "date-time"}]}
_KEYED = {"type": "object", "properties": {"key": _KEY}, "required": ["key"]}
_VALUES = {"type": "array", "items": _SCALAR, "minItems": 1, "maxItems": 1024}
_COUNT = {"type": "integer", "minimum": 0}
_CONDITION: dict[str, Any] = {
    "type": "object",
    "description": "a field condition, exists / is_null / is_empty, has_id, or a nested filter "
    "(must / should / must_not / min_should)",
    "anyOf": [
        {
            "type": "object",
            "title": "match",
            "properties": {
                "key": _KEY,
                "match": {
                    "type": "object",
                    "description": '{"value": v} equality, {"any": [v, ...]} any of, or {"except": [v, ...]}: '
                    "the field holds a value that is none of these",
                    "properties": {"value": _SCALAR, "any": _VALUES, "except": _VALUES},
                },
            },
            "required": ["key", "match"],
        },
        {
            "type": "object",
            "title": "range",
            "properties": {
                "key": _KEY,
                "range": {
                    "type": "object",
                    "description": "bounds: numbers, or ISO-8601 datetimes",
                    "properties": {op: _BOUND for op in ("gt", "gte", "lt", "lte")},
                },
            },
            "required": ["key", "range"],
        },
        {
            "type": "object",
            "title": "values_count",
            "properties": {
                "key": _KEY,
                "values_count": {
                    "type": "object",
                    "description": "bounds on how many values the field holds (a list's non-null elements; 1 for "
                    "a value; 0 when absent or null)",
                    "properties": {op: _COUNT for op in ("gt", "gte", "lt", "lte")},
                },
            },
            "required": ["key", "values_count"],
        },
        *(
            {"type": "object", "title": op, "properties": {op: _KEYED}, "required": [op]}
            for op in ("exists", "is_null", "is_empty")
        ),
        {
            "type": "object",
            "title": "has_id",
            "properties": {
                "has_id": {
                    "type": "array",
                    "description": "the document is one of these ids",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "maxItems": 1024,
                }
            },
            "required": ["has_id"],
        },
        {"type": "object", "title": "nested filter", "properties": {"must": {"type": "array"}}},
    ],
}
_MIN_SHOULD = {
    "type": "object",
    "description": "at least min_count of the conditions hold",
    "properties": {
        "conditions": {"type": "array", "items": _CONDITION, "minItems": 1},
        "min_count": {"type": "integer", "minimum": 1},
    },
    "required": ["conditions", "min_count"],
}
FILTER_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Filter",
    "description": "Metadata filter, applied inside retrieval. must: every condition holds; should: at least one "
    "does; must_not: none does; min_should: at least min_count of its conditions do. Conditions nest. Fields "
    "declared in the collection's schema are indexed and type-checked; other fields are matched through columns "
    "built from the stored metadata, or refused when the schema is strict. "
    'Example: {"must": [{"key": "tenant", "match": {"value": "acme"}}, '
    '{"key": "published", "range": {"gte": "2024-01-01T00:00:00Z"}}], '
    '"must_not": [{"key": "lang", "match": {"any": ["de", "fr"]}}]}',
    "properties": {
        **{clause: {"type": "array", "items": _CONDITION} for clause in ("must", "should", "must_not")},
        "min_should": _MIN_SHOULD,
    },
}

# Any JSON value, as the schema above documents it: the engine's parser (indexing/filter_parser.py parse_filter) is
# the one place that refuses a filter, so a filter that is not an object ([], "x", 7) is a 422 invalid_filter naming
# its path on every route, as any other fault of a filter is.
FilterJson = Annotated[Any, WithJsonSchema({"anyOf": [FILTER_JSON_SCHEMA, {"type": "null"}]})]
# DELETE by filter's: never {} (that would be every document)
NonEmptyFilterJson = Annotated[Any, WithJsonSchema({**FILTER_JSON_SCHEMA, "minProperties": 1})]
FilterField = Field(None, description="metadata filter (see the Filter schema); null or {}: no filter")
