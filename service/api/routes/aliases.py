"""/aliases: names that point at a collection, switched atomically; every route that takes a collection name takes
an alias too."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response, status
from pydantic import BaseModel, Field

from indexing.collection import NAME_RE
from service.aliases import (
    AliasConflict,
    AliasLimitExceeded,
    AliasNotFound,
    NotACollection,
    delete_alias,
    get_alias,
    list_aliases,
    put_alias,
)
from service.api.json_body import JsonRoute
from service.deps import State
from service.errors import ApiError, shown
from service.schemas import REQUEST_CONFIG, CollectionName, ErrorResponse

router = APIRouter(prefix="/aliases", tags=["aliases"], route_class=JsonRoute)
AliasName = Annotated[
    str, Path(min_length=1, max_length=64, pattern=NAME_RE.pattern, description="alias (a collection-like name)")
]
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}, 422: {"model": ErrorResponse}}


class AliasRequest(BaseModel):
    model_config = REQUEST_CONFIG
    collection: str = CollectionName


class AliasOut(BaseModel):
    alias: str
    collection: str = Field(..., description="the collection the alias points at")


class AliasList(BaseModel):
    aliases: list[AliasOut]


def _not_found(alias: str) -> ApiError:
    return ApiError(404, "alias_not_found", f"no alias named {shown(alias)}")


@router.get("", response_model=AliasList)
def list_all(state: State) -> AliasList:
    return AliasList(aliases=[AliasOut(alias=a, collection=c) for a, c in list_aliases(state=state).items()])


@router.get("/{alias}", response_model=AliasOut, responses=NOT_FOUND)
def get_one(alias: AliasName, state: State) -> AliasOut:
    try:
        return AliasOut(alias=alias, collection=get_alias(state=state, alias=alias))
    except AliasNotFound as exc:
        raise _not_found(alias) from exc


@router.put(
    "/{alias}",
    response_model=AliasOut,
    responses={404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)
def put_one(alias: AliasName, body: AliasRequest, state: State) -> AliasOut:
    """Point an alias at a collection: created, or switched in one atomic step (a search through the alias sees
    the old collection or the new one, never an error). 409 when a collection has the alias's name, or when a new
    alias would pass VELA_MAX_ALIASES."""
    try:
        put_alias(state=state, alias=alias, collection=body.collection)
    except AliasConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    except AliasLimitExceeded as exc:
        raise ApiError(409, "limit_exceeded", str(exc)) from exc
    except NotACollection as exc:
        raise ApiError(404, "collection_not_found", str(exc)) from exc
    return AliasOut(alias=alias, collection=body.collection)


@router.delete("/{alias}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
def delete_one(alias: AliasName, state: State) -> Response:
    """Remove an alias; the collection it points at stays."""
    try:
        delete_alias(state=state, alias=alias)
    except AliasNotFound as exc:
        raise _not_found(alias) from exc
    return Response(status_code=status.HTTP_204_NO_CONTENT)
