"""Snapshots on disk: their names, the folder of each collection, what a listing shows, and the tar's manifest.

Layout, under the server's snapshots folder (VELA_SNAPSHOTS_DIR, default `<data dir>/snapshots`):
    <collection>/<collection>-<yyyymmddThhmmss>-<6 hex>.tar    one snapshot (indexing/snapshots.py writes it)
    <collection>/<collection>-<yyyymmddThhmmss>-<6 hex>.json   what a listing shows of it: written before the tar is
                                                               renamed into place, so a listed tar always has one
    <collection>/.<job id>.*                                   a snapshot job's work in progress

A snapshot is found only by listing its folder and matching a name the server made: no string a client sent is
ever joined into a path. The tar holds `snapshot.json` first (this module's `read_manifest` reads only that
member), then `collection.json`, then the doc store(s) and, for a CDE collection, its corpus context.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import tarfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from indexing.collection_settings import NAME_RE
from velaio.files import write_atomic

FORMAT_VERSION = 1
MANIFEST = "snapshot.json"
MAX_MANIFEST_BYTES = 1 << 20  # snapshot.json lists a few files per shard: far below this
SNAPSHOT_NAME = re.compile(r"(?P<collection>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})-\d{8}T\d{6}-[0-9a-f]{6}\.tar")
# The only members a snapshot may hold besides snapshot.json: anything else is refused before it is extracted.
# A CDE collection's context files: a plain name of at most 100 characters, never "." or ".."
MEMBER = re.compile(
    r"collection\.json|docs\.sqlite3|shards/s\d{3}/(?:collection\.json|docs\.sqlite3)|context/(?!\.+$)[\w.-]{1,100}"
)
UNREGISTERED = "unregistered"  # a model no registry name reaches (the API's name for it, too)


class SnapshotNotFound(LookupError):
    pass


class SnapshotInvalid(ValueError):
    """A tar that is not a whole snapshot this server can read: the message says what is wrong."""


@dataclass(frozen=True)
class SnapshotInfo:
    name: str
    collection: str
    created_at: float
    bytes: int
    documents: int
    passages: int
    sha256: str
    job: str = ""  # the job that wrote it (a leftover of a job that is over is removed by the next snapshot job)

    def public(self) -> dict[str, Any]:
        """What the API shows: no path, no job."""
        out = asdict(self)
        out.pop("job")
        return out


def new_name(collection: str, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{collection}-{stamp}-{secrets.token_hex(3)}.tar"


def info_path(tar: Path) -> Path:
    return tar.with_suffix(".json")


def write_info(tar: Path, info: SnapshotInfo) -> None:
    write_atomic(info_path(tar), json.dumps(asdict(info), indent=2).encode())


def read_info(tar: Path) -> SnapshotInfo | None:
    try:
        return SnapshotInfo(**json.loads(info_path(tar).read_bytes()))
    except (OSError, ValueError, TypeError):
        return None


def folder_digest(embedder: str) -> str:
    """What a snapshot records of a model folder no registry name reaches: enough to recognise it, not to read it."""
    return hashlib.sha256(embedder.encode()).hexdigest()


def _child(parent: Path, name: str) -> Path | None:
    """`parent`'s entry called `name`, found by listing `parent`, never by joining: a directory, not a symlink."""
    try:
        with os.scandir(parent) as entries:
            for entry in entries:
                if entry.name == name and entry.is_dir(follow_symlinks=False):
                    return Path(entry.path)
    except FileNotFoundError:
        return None
    return None


def collection_folder(root: Path, collection: str) -> Path | None:
    """The folder of a collection's snapshots, if it has one (a deleted collection's stays). Only a collection name
    can have one: the server's own entries there (`.uploads`) are no collection's."""
    return _child(root, collection) if NAME_RE.fullmatch(collection) else None


def _listed(folder: Path) -> Iterator[tuple[Path, SnapshotInfo]]:
    with os.scandir(folder) as entries:
        for entry in entries:
            match = SNAPSHOT_NAME.fullmatch(entry.name)
            if match is None or match["collection"] != folder.name or not entry.is_file(follow_symlinks=False):
                continue
            info = read_info(Path(entry.path))
            if info is not None and info.name == entry.name:
                yield Path(entry.path), info


def list_snapshots(root: Path, collection: str) -> list[SnapshotInfo]:
    """The collection's snapshots, newest first; empty when it has none."""
    folder = collection_folder(root, collection)
    if folder is None:
        return []
    return sorted((info for _, info in _listed(folder)), key=lambda i: (i.created_at, i.name), reverse=True)


def find_snapshot(root: Path, collection: str, name: str) -> tuple[Path, SnapshotInfo]:
    """The snapshot `name` of `collection`: its path and what the listing shows. SnapshotNotFound unless the name
    is one the server makes and the listing has it."""
    match = SNAPSHOT_NAME.fullmatch(name)
    folder = collection_folder(root, collection) if match and match["collection"] == collection else None
    if folder is not None:
        for path, info in _listed(folder):
            if path.name == name:
                return path, info
    raise SnapshotNotFound(name)


def delete_snapshot(root: Path, collection: str, name: str, *, tidy: bool = False) -> None:
    """The tar first, then what the listing read of it (a crash in between leaves an unlisted record, removed by
    the collection's next snapshot job). With `tidy` (the collection is gone), its folder too once it is empty: a
    snapshot job makes its work folder inside before anything else, so an empty folder has no job writing to it."""
    path, _ = find_snapshot(root, collection, name)
    path.unlink(missing_ok=True)
    info_path(path).unlink(missing_ok=True)
    if tidy:
        with contextlib.suppress(OSError):  # not empty (another snapshot, a job's work folder): kept
            path.parent.rmdir()


def check_manifest(manifest: Any) -> dict[str, Any]:
    """A parsed snapshot.json, checked for what a restore relies on; SnapshotInvalid otherwise."""
    if not isinstance(manifest, dict):
        raise SnapshotInvalid(f"{MANIFEST} is not a JSON object")
    version = manifest.get("format")
    if version != FORMAT_VERSION:
        raise SnapshotInvalid(f"snapshot format {version!r} is not one this server reads (it reads {FORMAT_VERSION})")
    files, embedder = manifest.get("files"), manifest.get("embedder")
    if not isinstance(files, dict) or not files or not isinstance(embedder, dict):
        raise SnapshotInvalid(f"{MANIFEST} lists no files or no embedder")
    for member, entry in files.items():
        if not (isinstance(member, str) and MEMBER.fullmatch(member)):
            raise SnapshotInvalid(f"{MANIFEST} names a file a snapshot cannot hold: {member[:100]!r}")
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise SnapshotInvalid(f"{MANIFEST} has no sha256 for {member!r}")
        size = entry.get("bytes")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise SnapshotInvalid(f"{MANIFEST} has no size for {member!r}")
    documents = manifest.get("documents", 0)
    if not isinstance(documents, int) or isinstance(documents, bool) or documents < 0:
        raise SnapshotInvalid(f"{MANIFEST} has no valid document count")
    shards = manifest.get("shards")
    if not isinstance(shards, int) or isinstance(shards, bool) or not 1 <= shards <= 999:
        raise SnapshotInvalid(f"{MANIFEST} has no valid shard count")
    needed = {"collection.json"} | (
        {"docs.sqlite3"}
        if shards == 1
        else {f"shards/s{i:03d}/{f}" for i in range(shards) for f in ("collection.json", "docs.sqlite3")}
    )
    missing = sorted(needed - set(files))
    if missing:
        raise SnapshotInvalid(f"{MANIFEST} lacks {missing[:3]}: not a whole collection")
    return manifest


def read_manifest_member(tar: tarfile.TarFile, member: tarfile.TarInfo | None) -> dict[str, Any]:
    """snapshot.json from the tar's first member, checked."""
    if member is None or member.name != MANIFEST or not member.isfile():
        raise SnapshotInvalid(f"not a snapshot: its first member is not {MANIFEST}")
    if member.size > MAX_MANIFEST_BYTES:
        raise SnapshotInvalid(f"{MANIFEST} is {member.size} bytes: not a snapshot")
    data = tar.extractfile(member)
    if data is None:
        raise SnapshotInvalid(f"{MANIFEST} cannot be read")
    try:
        return check_manifest(json.loads(data.read()))
    except ValueError as exc:
        if isinstance(exc, SnapshotInvalid):
            raise
        raise SnapshotInvalid(f"{MANIFEST} is not JSON: the snapshot is damaged") from exc


def read_manifest(path: Path) -> dict[str, Any]:
    """A snapshot's snapshot.json (its first member: the rest of the tar is not read). SnapshotInvalid when the file
    is not a snapshot this server reads; the members' checksums are verified by the restore itself."""
    try:
        with tarfile.open(path, "r:") as tar:
            return read_manifest_member(tar, tar.next())
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise SnapshotInvalid(f"not a readable tar ({type(exc).__name__}): the snapshot is damaged") from exc
