"""The `Call`s of the routes on a collection's stored documents (see `vela_client.calls`): read one, scroll,
patch metadata, delete many, count, facets, and declaring fields. Writing documents (`index`, `delete_document`)
stays in `vela_client.calls` beside search."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from vela_client import encoding, routes
from vela_client.calls import _exists, _model, _set
from vela_client.models import Count, DocumentPage, Documents, Facet, JobAccepted, StoredDocument
from vela_client.routes import Call

# Added to a 413 that `index` gets: the way to send the same documents.
INDEX_IN_BATCHES = "index sends its documents in one request: index_in_batches splits them into requests that fit"


def get_document(collection: str, doc_id: str) -> Call[StoredDocument]:
    return routes.GET_DOCUMENT.call(_model(StoredDocument), name=collection, doc_id=doc_id)


def get_documents(collection: str, ids: Iterable[str], *, passages: bool = False) -> Call[Documents]:
    if isinstance(ids, str):  # a str is an iterable of one-letter ids: surely a mistake
        raise TypeError(f"ids must be a list of document ids, not one string (write [{ids!r}])")
    body = {"ids": list(ids), "passages": passages}
    return routes.GET_DOCUMENTS.call(_model(Documents), json=body, name=collection)


def document_exists(collection: str, doc_id: str) -> Call[bool]:
    return routes.DOCUMENT_EXISTS.call(_exists, name=collection, doc_id=doc_id)


def scroll_documents(
    collection: str,
    *,
    filter: Mapping[str, Any] | None,
    cursor: str | None,
    limit: int | None,
    order_by: str | None = None,
    direction: Literal["asc", "desc"] | None = None,
) -> Call[DocumentPage]:
    text = encoding.dumps(dict(filter)) if filter is not None else None
    params = _set(filter=text, cursor=cursor, limit=limit, order_by=order_by, direction=direction)
    return routes.SCROLL_DOCUMENTS.call(_model(DocumentPage), params=params, name=collection)


def patch_document(
    collection: str,
    doc_id: str,
    metadata: Mapping[str, Any],
    mode: Literal["merge", "replace"],
    unset: Iterable[str] | None = None,
) -> Call[JobAccepted]:
    if isinstance(unset, str):  # a str is an iterable of one-letter keys: surely a mistake
        raise TypeError(f"unset must be a list of keys, not one string (write [{unset!r}])")
    body: dict[str, Any] = {"metadata": dict(metadata), "mode": mode}
    if unset:
        body["unset"] = list(unset)
    return routes.PATCH_DOCUMENT.call(_model(JobAccepted), json=body, name=collection, doc_id=doc_id)


def delete_documents(collection: str, ids: Iterable[str] | None, filter: Mapping[str, Any] | None) -> Call[JobAccepted]:
    """By `ids` or by `filter`: exactly one of the two (the server's own rule, checked before anything is sent)."""
    body: dict[str, Any]
    if ids is not None and filter is None:
        if isinstance(ids, str):  # a str is an iterable of one-letter ids: surely a mistake
            raise TypeError("ids must be a list of document ids, not one string (use delete_document for one)")
        body = {"ids": list(ids)}
    elif filter is not None and ids is None:
        body = {"filter": dict(filter)}
    else:
        raise ValueError("give exactly one of ids and filter")
    return routes.DELETE_DOCUMENTS.call(_model(JobAccepted), json=body, name=collection)


def count(collection: str, filter: Mapping[str, Any] | None) -> Call[int]:
    parse = _model(Count)
    body = {"filter": dict(filter) if filter is not None else None}
    return routes.COUNT.call(lambda r: parse(r).count, json=body, name=collection)


def facet(collection: str, key: str, filter: Mapping[str, Any] | None, limit: int | None) -> Call[Facet]:
    body = _set(key=key, filter=dict(filter) if filter is not None else None, limit=limit)
    return routes.FACET.call(_model(Facet), json=body, name=collection)


def set_schema(collection: str, fields: Mapping[str, str], strict: bool) -> Call[JobAccepted]:
    body = {"fields": dict(fields), "strict": strict}
    return routes.SET_SCHEMA.call(_model(JobAccepted), json=body, name=collection)
