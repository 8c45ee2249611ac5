"""Judged query sets a reindex gate may name (indexing/gate.py): `<data dir>/datasets/<name>/` in the BEIR layout.

Registering copies a BEIR folder's queries.jsonl and qrels/*.tsv (the corpus is not needed: the collection is the
corpus) into a temporary sibling, then renames it into place: a name is either absent or a complete dataset."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from indexing.gate import DATASETS_DIR, UnknownDataset, dataset_dir
from models.registry import is_model_name
from velaio.beir import read_qrels, read_queries
from velaio.files import fsync_tree


class InvalidDataset(ValueError):
    pass


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    splits: list[str]
    queries: int
    judged: dict[str, int]  # split -> queries with judgements


def register_dataset(data_dir: Path, name: str, source: Path) -> DatasetEntry:
    """Copy `source` (queries.jsonl and qrels/<split>.tsv) in under `name`; InvalidDataset says what is wrong."""
    if not is_model_name(name):
        raise InvalidDataset(f"{name!r} is not a dataset name (1-64 letters, digits, '-', '_', '.')")
    root = data_dir / DATASETS_DIR
    if (root / name).exists():
        raise InvalidDataset(f"a dataset named {name!r} is registered already")
    splits = sorted(p.stem for p in (source / "qrels").glob("*.tsv")) if (source / "qrels").is_dir() else []
    if not (source / "queries.jsonl").is_file() or not splits:
        raise InvalidDataset(f"{source} is not a BEIR folder: it needs queries.jsonl and qrels/<split>.tsv")
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        (tmp / "qrels").mkdir()
        shutil.copyfile(source / "queries.jsonl", tmp / "queries.jsonl")
        for split in splits:
            shutil.copyfile(source / "qrels" / f"{split}.tsv", tmp / "qrels" / f"{split}.tsv")
        read_queries(tmp)  # readable before it is named
        for split in splits:
            read_qrels(tmp, split)
        tmp.chmod(0o755)  # mkdtemp's 0700 is for the half-made copy only
        fsync_tree(tmp)
        tmp.rename(root / name)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, InvalidDataset):
            raise
        raise InvalidDataset(f"{source}: {exc}") from exc
    return describe_dataset(data_dir, name)


def describe_dataset(data_dir: Path, name: str) -> DatasetEntry:
    path = data_dir / DATASETS_DIR / name
    splits = sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
    usable = [s for s in splits if _usable(data_dir, name, s)]
    if not usable:
        raise UnknownDataset()
    queries = read_queries(path)
    judged = {s: len(set(read_qrels(path, s)) & set(queries)) for s in usable}
    return DatasetEntry(name=name, splits=usable, queries=len(queries), judged=judged)


def _usable(data_dir: Path, name: str, split: str) -> bool:
    try:
        dataset_dir(data_dir, name, split)
    except UnknownDataset:
        return False
    return True


def list_datasets(data_dir: Path) -> list[DatasetEntry]:
    root = data_dir / DATASETS_DIR
    out = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.name.startswith("."):
            continue
        try:
            out.append(describe_dataset(data_dir, path.name))
        except UnknownDataset:
            continue
    return out


def remove_dataset(data_dir: Path, name: str) -> None:
    if not is_model_name(name) or not (data_dir / DATASETS_DIR / name).is_dir():
        raise UnknownDataset()
    shutil.rmtree(data_dir / DATASETS_DIR / name)
