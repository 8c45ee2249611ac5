"""The client keeps up with the API's schemas: a search option, index, schema, reindex or delete-many parameter or
response field the client lacks fails here (add it to vela_client/models.py or calls.py and both clients)."""

from __future__ import annotations

import inspect
import typing

import pytest
from pydantic import BaseModel
from vela_client import AsyncVelaClient, VelaClient, models
from vela_client.search_calls import SearchOptions

from service import document_schemas, reindex_schemas, schemas, search_requests, search_schemas, snapshot_schemas
from service.api.routes.limits import LimitsOut


def _fields(model: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


def test_every_search_option_is_a_client_keyword() -> None:
    assert _fields(search_requests.SearchOptions) - {"collection"} == set(SearchOptions.__annotations__)


@pytest.mark.parametrize(
    ("client", "server"),
    [
        (models.Collection, schemas.CollectionOut),
        (models.Job, schemas.JobOut),
        (models.JobAccepted, schemas.JobAccepted),
        (models.Hit, search_schemas.HitOut),
        (models.Ranks, search_schemas.Ranks),
        (models.PassageRef, search_schemas.PassageRef),
        (models.RerankInfo, search_schemas.RerankInfo),
        (models.SearchResponse, search_schemas.SearchResponse),
        (models.BatchSearchResponse, search_schemas.BatchSearchResponse),
        (models.StoredDocument, document_schemas.StoredDocumentOut),
        (models.DocumentPage, document_schemas.ScrollResponse),
        (models.Rerank, search_requests.RerankOptions),
        (models.Fusion, search_requests.FusionOptions),
        (models.Document, schemas.Document),
        (models.Snapshot, snapshot_schemas.SnapshotOut),
        (models.Limits, LimitsOut),
    ],
)
def test_client_models_have_every_server_field(client: type[BaseModel], server: type[BaseModel]) -> None:
    assert _fields(server) - _fields(client) == set()


def _literal_values(annotation: object) -> set[object]:
    """The values a Literal annotation (or an optional one) allows."""
    if typing.get_origin(annotation) is typing.Literal:
        return set(typing.get_args(annotation))
    return {value for arg in typing.get_args(annotation) for value in _literal_values(arg)}


@pytest.mark.parametrize("field", ["method", "normalization"])
def test_fusion_takes_exactly_the_servers_values(field: str) -> None:
    server = _literal_values(search_requests.FusionOptions.model_fields[field].annotation)
    assert server and _literal_values(models.Fusion.model_fields[field].annotation) == server


Client = type[VelaClient] | type[AsyncVelaClient]


@pytest.mark.parametrize("cls", [VelaClient, AsyncVelaClient])
def test_reindex_takes_every_request_field(cls: Client) -> None:
    params = set(inspect.signature(cls.reindex).parameters)
    assert _fields(reindex_schemas.ReindexRequest) - params == set()


@pytest.mark.parametrize("cls", [VelaClient, AsyncVelaClient])
def test_index_and_set_schema_take_every_request_field(cls: Client) -> None:
    index = set(inspect.signature(cls.index).parameters)
    assert _fields(schemas.IndexRequest) - index == set()
    assert _fields(schemas.IndexRequest) - set(inspect.signature(cls.index_in_batches).parameters) == set()
    # The schema's own fields: `fields` is index's `schema` (and set_schema's `fields`), `strict` is `strict`.
    assert _fields(schemas.CollectionSchema) - {"fields"} - index == set()
    assert _fields(schemas.CollectionSchema) - set(inspect.signature(cls.set_schema).parameters) == set()


@pytest.mark.parametrize("cls", [VelaClient, AsyncVelaClient])
def test_delete_documents_takes_exactly_the_request_fields(cls: Client) -> None:
    params = set(inspect.signature(cls.delete_documents).parameters)
    waiting = {"self", "collection", "wait", "on_progress", "timeout"}
    assert _fields(document_schemas.DeleteDocumentsRequest) == params - waiting
