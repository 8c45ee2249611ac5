"""A collection's settings (collection.json), its name rules and the errors collections raise."""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from indexing.bm25 import BM25Params
from indexing.chunking import ChunkingParams
from indexing.dense import DenseIndexParams
from indexing.filters import FIELD_TYPES
from models.model_dirs import on_this_install

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SETTINGS_FILE = "collection.json"
MAX_SHARDS = 256  # a shard per actor: beyond this the fan-out, not the index, is what costs


class CollectionNotFound(KeyError):
    pass


class CollectionConflict(ValueError):
    pass


class IndexNotReady(RuntimeError):
    """A collection has no published index yet (or its files are unreadable until the next commit)."""


SEGMENTS_DIR = "segments"
MAX_FIELDS = 64  # declared metadata fields of a collection
LEGACY_INDEX_DIR = "index"  # whole-collection snapshots, before segments: rebuilt into one segment on open


@dataclass(frozen=True)
class CollectionSettings:
    name: str
    embedder: str  # resolved model directory
    dim: int
    small_dim: int = 256
    chunking: ChunkingParams = field(default_factory=ChunkingParams)
    bm25: BM25Params = field(default_factory=BM25Params)
    created_at: float = field(default_factory=time.time)
    dense_index: DenseIndexParams = field(default_factory=DenseIndexParams)
    shards: int = 1  # > 1: documents split by a hash of their id over shard directories (indexing/shards.py)
    # Declared metadata fields {"fields": {name: type}, "strict": bool} (indexing/filters.py Schema)
    schema: dict[str, Any] = field(default_factory=lambda: {"fields": {}, "strict": False})
    # How hybrid searches fuse dense and BM25 (indexing/fusion.py FusionSpec JSON), and how it was chosen
    # (indexing/fusion_choice.py: without labels, again each time the collection doubles)
    fusion: dict[str, Any] = field(default_factory=lambda: {"method": "rrf"})

    def __post_init__(self) -> None:
        if not 1 <= self.shards <= MAX_SHARDS:
            raise ValueError(f"shards must be between 1 and {MAX_SHARDS}, got {self.shards}")
        check_schema(self.schema)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["bm25"] = self.bm25.to_json()
        d["dense_index"] = self.dense_index.to_json()
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CollectionSettings:
        return cls(
            name=d["name"],
            embedder=on_this_install(d["embedder"]),  # the packaged default of another install is this one's
            dim=int(d["dim"]),
            small_dim=int(d["small_dim"]),
            chunking=ChunkingParams(**d["chunking"]),
            bm25=BM25Params.from_json(d["bm25"]),
            created_at=float(d["created_at"]),
            dense_index=DenseIndexParams.from_json(d.get("dense_index")),  # absent from older files
            shards=int(d.get("shards", 1)),
            schema=d.get("schema") or {"fields": {}, "strict": False},
            fusion=d.get("fusion") or {"method": "rrf"},  # absent from older files
        )


def check_schema(schema: dict[str, Any]) -> None:
    """A collection's declared fields: {"fields": {name: type}, "strict": bool}; ValueError otherwise."""
    if not isinstance(schema, dict) or set(schema) - {"fields", "strict"}:
        raise ValueError('schema must be {"fields": {name: type}, "strict": bool}')
    fields = schema.get("fields", {})
    if not isinstance(fields, dict) or len(fields) > MAX_FIELDS:
        raise ValueError(f"schema fields must be an object of at most {MAX_FIELDS} name: type pairs")
    for name, kind in fields.items():
        if not isinstance(name, str) or not 0 < len(name) <= 256:
            raise ValueError(f"schema field name {name!r} must be 1-256 characters")
        if "[]" in name:  # filters read `a[].b` as `a.b`: a field declared so could never be named by one
            dotted = name.replace("[]", "")
            if not dotted:
                raise ValueError(f"schema field name {name!r}: [] marks a list in a filter's path, not a field")
            raise ValueError(f"schema field name {name!r}: a nested field is declared by its dotted path ({dotted!r})")
        if kind not in FIELD_TYPES:
            raise ValueError(f"schema field {name!r}: type must be one of {list(FIELD_TYPES)}, got {kind!r}")
    if not isinstance(schema.get("strict", False), bool):
        raise ValueError("schema strict must be true or false")


def validate_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise ValueError(
            "collection name must be 1-64 characters of letters, digits, '_', '-' or '.', "
            "starting with a letter or digit"
        )
    return name


COLLECTIONS_FOLDER = "collections"  # `<data dir>/collections/NAME`: every collection's folder
REGISTRY_FOLDER = "models"  # the model registry's default place, `<data dir>/models` (VELA_MODELS_DIR unset)


def on_this_data_dir(stored: str, root: Path) -> str:
    """A registered model's folder as the collection at `root` reaches it now. A collection records the folder's
    absolute path; the registry's default place lies inside the data directory, so a data directory moved to
    another path (a new mount point, a renamed disk) moved its models with it. A recorded
    `.../models/NAME` that is gone is `<this data dir>/models/NAME` when that exists; a folder still on disk
    (a copied data directory) is used where it is. The data directory is the parent of the `collections`
    folder that holds `root`."""
    path = Path(stored)
    if not path.is_absolute() or len(path.parts) < 2 or path.parts[-2] != REGISTRY_FOLDER or path.exists():
        return stored
    data_dir = next((p.parent for p in root.parents if p.name == COLLECTIONS_FOLDER), None)
    moved = data_dir / REGISTRY_FOLDER / path.name if data_dir is not None else None
    return str(moved) if moved is not None and moved.is_dir() else stored


def load_settings(root: Path) -> CollectionSettings:
    settings = CollectionSettings.from_json(json.loads((root / SETTINGS_FILE).read_text()))
    return replace(settings, embedder=on_this_data_dir(settings.embedder, root.resolve()))
