"""The answers of the refusals a request that makes a collection can meet (POST /index on a new name, PUT
/collections/{name}): one mapping, so that both routes answer a fault alike."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from indexing.collection import CollectionConflict
from indexing.shard_budget import ShardLimitExceeded
from service.documents import UnsupportedSharding
from service.errors import ApiError
from service.model_registry import ModelKindMismatch, UnknownModelName, UnusableModel


@contextmanager
def creation_errors() -> Iterator[None]:
    try:
        yield
    except UnsupportedSharding as exc:
        raise ApiError(422, "invalid_request", str(exc)) from exc
    except CollectionConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    except ShardLimitExceeded as exc:  # the data directory holds all the shards it may: nothing was created
        raise ApiError(409, "limit_exceeded", str(exc)) from exc
    except UnknownModelName as exc:
        raise ApiError(422, "unknown_model", str(exc)) from exc
    except (ModelKindMismatch, UnusableModel) as exc:
        raise ApiError(422, "invalid_model", str(exc)) from exc
