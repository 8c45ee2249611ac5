"""The path parameter type of a document id: `{doc_id:doc_id}`.

Starlette's `:path` is `.*`, and a route's pattern ends in `$`: `.` stops at a newline and `$` matches before a
trailing one, so `/documents/a%0A` read, patched or deleted document `a`, and an id with a newline inside
could not be reached at all. This one matches every character, newlines included."""

from __future__ import annotations

from starlette.convertors import PathConvertor, register_url_convertor


class DocIdConvertor(PathConvertor):
    regex = "(?s:.*)"


register_url_convertor("doc_id", DocIdConvertor())
