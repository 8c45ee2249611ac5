"""The manifest of a shard: which segments, with which deletion bitmaps, searches read together.

Layout of `<shard>/segments/`:
    CURRENT                     {"version": N}; replaced atomically: readers see one whole manifest
    m00000N.json                the manifest: segments, deletion files, doc store seq, max passage id, context
    seg-<id>/                   immutable segments (indexing/segment.py)
    seg-<id>.del-<N>.npy        the rows of a segment deleted as of manifest N (packed bits, little-endian)
    ctx-<id>/                   the corpus context of a CDE collection's vectors (models/cde/context.py)

A writer builds what is new, writes the next manifest and only then names it in CURRENT; files no manifest
of the last KEEP_MANIFESTS names (and temporary folders of a crashed build) are removed after that.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from velaio.files import load_npy, try_file_lock, write_atomic

CURRENT = "CURRENT"
# The current manifest and three before it: a reader may still be loading one, and a sharded collection's set
# (segments/SHARDS) may lag its shards by a publish or two while a commit or merge finishes.
KEEP_MANIFESTS = 4
RETRIES = 5


class ManifestError(RuntimeError):
    """A manifest is missing or unreadable."""


def manifest_path(directory: Path, version: int) -> Path:
    return directory / f"m{version:06d}.json"


def current_version(directory: Path) -> int | None:
    try:
        return int(json.loads((directory / CURRENT).read_text())["version"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise ManifestError(f"unreadable {directory / CURRENT}: {exc}") from exc


def read_manifest(directory: Path, version: int) -> dict[str, Any]:
    try:
        return json.loads(manifest_path(directory, version).read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{manifest_path(directory, version)}: {exc}") from exc


def current_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest CURRENT names. A writer may publish twice and remove this one between the two reads:
    then CURRENT is read again."""
    for _ in range(RETRIES):
        version = current_version(directory)
        if version is None:
            return None
        try:
            return read_manifest(directory, version)
        except ManifestError:
            if current_version(directory) == version:
                raise  # still named and unreadable: a real error
    raise ManifestError(f"{directory}: CURRENT kept moving")


def save_dead(directory: Path, segment: str, version: int, dead: np.ndarray) -> str:
    """Write a segment's deletion bitmap as of manifest `version`; returns the file name."""
    name = f"{segment}.del-{version:06d}.npy"
    buf = io.BytesIO()
    np.save(buf, np.packbits(dead.astype(bool), bitorder="little"), allow_pickle=False)
    write_atomic(directory / name, buf.getvalue())
    return name


def load_dead(directory: Path, entry: dict[str, Any]) -> np.ndarray:
    """(rows,) bool: True where the row is deleted."""
    rows = int(entry["rows"])
    if not entry.get("deletes"):
        return np.zeros(rows, bool)
    bits = load_npy(directory / entry["deletes"])
    return np.unpackbits(bits, count=rows, bitorder="little").astype(bool)


def publish(directory: Path, manifest: dict[str, Any]) -> int:
    """Write `manifest` as the next version and name it in CURRENT; then remove what nothing names."""
    version = (current_version(directory) or 0) + 1
    manifest = {**manifest, "version": version}
    write_atomic(manifest_path(directory, version), json.dumps(manifest, indent=1).encode())
    write_atomic(directory / CURRENT, json.dumps({"version": version}).encode())
    collect_garbage(directory)
    return version


def referenced(manifest: dict[str, Any]) -> set[str]:
    names = {s["name"] for s in manifest["segments"]} | {s["deletes"] for s in manifest["segments"] if s["deletes"]}
    if manifest.get("context"):
        names.add(f"ctx-{manifest['context']}")
    return names


def collect_garbage(directory: Path) -> list[str]:
    """Remove segments, deletion files, contexts and manifests that none of the last KEEP_MANIFESTS
    manifests names, and every temporary file (a build that crashed, or one still being written by a merge
    that will then fail to publish and retry). Returns what was removed."""
    version = current_version(directory)
    if version is None:
        return []
    keep_versions = [v for v in range(version - KEEP_MANIFESTS + 1, version + 1) if v > 0]
    keep = {CURRENT, "publish.lock", "merge.lock", "set.lock", "SHARDS"}
    for v in keep_versions:
        keep.add(manifest_path(directory, v).name)
        try:
            keep |= referenced(read_manifest(directory, v))
        except ManifestError:
            continue
    merges_idle = _merge_lock_free(directory)
    removed = []
    for p in directory.iterdir():
        if p.name in keep or (p.name.startswith("merging-") and not merges_idle):
            continue
        removed.append(p.name)
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return removed


def _merge_lock_free(directory: Path) -> bool:
    """True when no merge runs on this shard (a merge builds under merging-*, holding merge.lock)."""
    with try_file_lock(directory / "merge.lock") as free:
        return free
