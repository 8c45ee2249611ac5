"""Typed arguments to `Call`s, one function per route: the part of every method the sync and async clients share.

Optional arguments left as None are not sent, so the server's defaults (and any it changes later) apply.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from vela_client import routes
from vela_client.errors import VelaError, error_from_response
from vela_client.models import (
    Alias,
    AliasList,
    Collection,
    CollectionList,
    Document,
    Health,
    Job,
    JobAccepted,
    JobPage,
    Limits,
    Model,
    ModelList,
    Readiness,
)
from vela_client.routes import Call

M = TypeVar("M", bound=BaseModel)
DocumentLike = Document | Mapping[str, Any]


def _checked(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise error_from_response(response)
    return response


def _model(cls: type[M]) -> Callable[[httpx.Response], M]:
    def parse(response: httpx.Response) -> M:
        _checked(response)
        try:
            return cls.model_validate_json(response.content)
        except ValidationError as exc:
            raise VelaError(
                f"unexpected {cls.__name__} response from {response.request.url}: {exc}",
                code="bad_response",
                status=response.status_code,
            ) from exc

    return parse


def _no_content(response: httpx.Response) -> None:
    _checked(response)


def _text(response: httpx.Response) -> str:
    return _checked(response).text


def _set(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def healthz() -> Call[Health]:
    return routes.HEALTHZ.call(_model(Health))


def readyz() -> Call[Readiness]:
    return routes.READYZ.call(_model(Readiness))


def metrics() -> Call[str]:
    return routes.METRICS.call(_text)


def list_collections() -> Call[list[Collection]]:
    parse = _model(CollectionList)
    return routes.LIST_COLLECTIONS.call(lambda r: parse(r).collections)


def get_collection(name: str) -> Call[Collection]:
    return routes.GET_COLLECTION.call(_model(Collection), name=name)


def create_collection(
    name: str,
    *,
    embedder: str | None = None,
    shards: int | None = None,
    schema: Mapping[str, str] | None = None,
    strict: bool = False,
) -> Call[Collection]:
    """`schema` and `strict` as `index` takes them: {field: type}, and whether filters may name others."""
    if strict and schema is None:
        raise ValueError("strict applies only with a schema")
    body = _set(embedder=embedder, shards=shards)
    if schema is not None:
        body["schema"] = {"fields": dict(schema), "strict": strict}
    return routes.CREATE_COLLECTION.call(_model(Collection), json=body, name=name)


def _exists(response: httpx.Response) -> bool:
    """A HEAD's answer: 200 True, 404 False; any other failure raised as it would be for the GET."""
    if response.status_code == 404:
        return False
    _checked(response)
    return True


def collection_exists(name: str) -> Call[bool]:
    return routes.COLLECTION_EXISTS.call(_exists, name=name)


def delete_collection(name: str) -> Call[None]:
    return routes.DELETE_COLLECTION.call(_no_content, name=name)


def delete_document(collection: str, doc_id: str) -> Call[JobAccepted]:
    return routes.DELETE_DOCUMENT.call(_model(JobAccepted), name=collection, doc_id=doc_id)


def reindex(
    collection: str,
    embedder: str,
    chunking: Mapping[str, int] | None,
    promote: str,
    gate: Mapping[str, Any] | None,
    reencode: bool = False,
) -> Call[JobAccepted]:
    body = _set(embedder=embedder, chunking=dict(chunking) if chunking else None, promote=promote)
    if reencode:
        body["reencode"] = True
    if gate is not None:
        body["gate"] = dict(gate)
    return routes.REINDEX.call(_model(JobAccepted), json=body, name=collection)


def promote(collection: str) -> Call[JobAccepted]:
    return routes.PROMOTE.call(_model(JobAccepted), json={}, name=collection)


def rollback(collection: str) -> Call[JobAccepted]:
    return routes.ROLLBACK.call(_model(JobAccepted), json={}, name=collection)


def _document(doc: DocumentLike) -> dict[str, Any]:
    if isinstance(doc, Document):
        return doc.model_dump(exclude_none=True)
    if not isinstance(doc, Mapping):
        raise TypeError(f"each document is a Document or a mapping with 'id' and 'text', not {type(doc).__name__}")
    return dict(doc)


def index_envelope(
    collection: str, *, embedder: str | None, shards: int | None, schema: Mapping[str, str] | None, strict: bool
) -> dict[str, Any]:
    """The body of `POST /index` but its documents: every batch of `index_in_batches` repeats it."""
    if strict and schema is None:
        raise ValueError("strict applies only with a schema")
    body = _set(collection=collection, embedder=embedder, shards=shards)
    if schema is not None:
        body["schema"] = {"fields": dict(schema), "strict": strict}
    return body


def check_documents_argument(documents: object) -> None:
    if isinstance(documents, (str, bytes, Mapping)):  # iterable, but not of documents
        raise TypeError(f"documents is a list of documents, not one {type(documents).__name__}")


def index(
    collection: str,
    documents: Iterable[DocumentLike],
    *,
    embedder: str | None,
    shards: int | None,
    schema: Mapping[str, str] | None = None,
    strict: bool = False,
) -> Call[JobAccepted]:
    body = index_envelope(collection, embedder=embedder, shards=shards, schema=schema, strict=strict)
    check_documents_argument(documents)
    body["documents"] = [_document(d) for d in documents]
    return routes.INDEX.call(_model(JobAccepted), json=body)


def get_job(job_id: str) -> Call[Job]:
    return routes.GET_JOB.call(_model(Job), job_id=job_id)


def list_jobs(
    collection: str | None,
    status: Iterable[str] | None,
    kind: Iterable[str] | None,
    limit: int | None,
    cursor: str | None,
) -> Call[JobPage]:
    def names(values: Iterable[str] | None) -> list[str] | None:  # one name, or several (sent repeated)
        return None if values is None else [values] if isinstance(values, str) else list(values)

    params = _set(
        collection=collection,
        status=names(status),
        kind=names(kind),
        limit=limit,
        cursor=cursor,
    )
    return routes.LIST_JOBS.call(_model(JobPage), params=params)


def cancel_job(job_id: str) -> Call[Job]:
    return routes.CANCEL_JOB.call(_model(Job), job_id=job_id)


def retry_job(job_id: str) -> Call[Job]:
    return routes.RETRY_JOB.call(_model(Job), job_id=job_id)


def list_models() -> Call[list[Model]]:
    parse = _model(ModelList)
    return routes.LIST_MODELS.call(lambda r: parse(r).models)


def limits() -> Call[Limits]:
    return routes.LIMITS.call(_model(Limits))


def list_aliases() -> Call[list[Alias]]:
    parse = _model(AliasList)
    return routes.LIST_ALIASES.call(lambda r: parse(r).aliases)


def get_alias(alias: str) -> Call[Alias]:
    return routes.GET_ALIAS.call(_model(Alias), alias=alias)


def set_alias(alias: str, collection: str) -> Call[Alias]:
    return routes.PUT_ALIAS.call(_model(Alias), json={"collection": collection}, alias=alias)


def delete_alias(alias: str) -> Call[None]:
    return routes.DELETE_ALIAS.call(_no_content, alias=alias)
