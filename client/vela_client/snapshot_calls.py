"""The snapshot routes' `Call`s (see `vela_client.calls`): take, list, download, delete, restore and upload."""

from __future__ import annotations

from pathlib import Path

from vela_client import routes
from vela_client.calls import _model, _no_content
from vela_client.models import JobAccepted, Snapshot, SnapshotList
from vela_client.routes import Call
from vela_client.transfers import DownloadTarget


def create_snapshot(collection: str) -> Call[JobAccepted]:
    return routes.CREATE_SNAPSHOT.call(_model(JobAccepted), name=collection)


def list_snapshots(collection: str) -> Call[list[Snapshot]]:
    parse = _model(SnapshotList)
    return routes.LIST_SNAPSHOTS.call(lambda r: parse(r).snapshots, name=collection)


def download_snapshot(collection: str, snapshot: str, target: DownloadTarget) -> Call[None]:
    """The body goes to `target` as it comes (the transport writes it); `target.finish()` then puts it in place."""
    return routes.DOWNLOAD_SNAPSHOT.call(_no_content, download=target, name=collection, snapshot=snapshot)


def delete_snapshot(collection: str, snapshot: str) -> Call[None]:
    return routes.DELETE_SNAPSHOT.call(_no_content, name=collection, snapshot=snapshot)


def restore_snapshot(collection: str, snapshot: str, into: str) -> Call[JobAccepted]:
    return routes.RESTORE_SNAPSHOT.call(_model(JobAccepted), json={"into": into}, name=collection, snapshot=snapshot)


def upload_snapshot(path: Path, *, into: str, sha256: str) -> Call[JobAccepted]:
    """The file is the body, streamed; its length goes first (a body over the server's limit is refused unread)."""
    headers = {"Content-Type": "application/x-tar", "Content-Length": str(path.stat().st_size)}
    params = {"into": into, "sha256": sha256.lower()}
    return routes.UPLOAD_SNAPSHOT.call(_model(JobAccepted), params=params, upload=path, headers=headers)
