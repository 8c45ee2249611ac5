"""Bodies of the snapshot routes: what a listing shows of a snapshot, and the restore request."""

from __future__ import annotations

from pydantic import BaseModel, Field

from service.schemas import REQUEST_CONFIG, CollectionName


class SnapshotOut(BaseModel):
    name: str = Field(..., description="<collection>-<UTC yyyymmddThhmmss>-<6 hex>.tar, made by the server")
    collection: str = Field(..., description="the collection it was taken of")
    created_at: float = Field(..., description="when its doc stores were copied (Unix time)")
    bytes: int = Field(..., description="size of the tar")
    documents: int
    passages: int
    sha256: str = Field(..., description="sha256 of the whole tar, as `sha256sum` prints it for the download")


class SnapshotList(BaseModel):
    snapshots: list[SnapshotOut] = Field(..., description="newest first")


class RestoreRequest(BaseModel):
    model_config = REQUEST_CONFIG
    into: str = CollectionName
