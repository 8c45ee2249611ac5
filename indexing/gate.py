"""The gate of a reindex: NDCG@10 of the serving generation and of the new one on a judged query set.

A judged set is a registered dataset, `<data dir>/datasets/<name>/` in the BEIR layout (queries.jsonl and
qrels/<split>.tsv; a corpus.jsonl there is not read: the collection is the corpus), named by name only, or queries
and qrels sent inline. A name is resolved as the model registry resolves one (models/registry.py): 1-64 letters,
digits, `-`, `_` or `.`, not starting with a dot, a directory that is no symlink and holds none; anything else is
one error that echoes nothing, so a request cannot make the server read a folder of its choosing."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexing.collection import Collection
from indexing.engine import Fanout
from indexing.engine import search as engine_search
from indexing.fusion import fusion_in_force
from indexing.ranking import Mode, RankRequest
from models import Embedder
from models.registry import is_model_name
from velaio.beir import read_qrels, read_queries
from velaio.measures import Run, per_query_ndcg, ranked_scores

DATASETS_DIR = "datasets"
K = 10
MODES = ("dense", "bm25", "hybrid")


class UnknownDataset(LookupError):
    def __init__(self, message: str = "gate.dataset: no registered dataset of that name") -> None:
        super().__init__(message)


@dataclass(frozen=True)
class JudgedSet:
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def dataset_dir(data_dir: Path, name: str, split: str = "test") -> Path:
    """The folder of a registered dataset with queries and the split's qrels; UnknownDataset for anything else
    (for a registered dataset without that split, a message that names the splits it has)."""
    if not is_model_name(name):
        raise UnknownDataset()
    path = data_dir / DATASETS_DIR / name
    try:
        mode = os.lstat(path).st_mode
        queries = os.lstat(path / "queries.jsonl").st_mode
        qrels_dir = os.lstat(path / "qrels").st_mode
    except OSError:
        raise UnknownDataset() from None
    # S_ISREG of an lstat: a symlinked file is refused too.
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode) or not stat.S_ISDIR(qrels_dir) or not stat.S_ISREG(queries):
        raise UnknownDataset()
    if not is_model_name(split) or not _regular_file(path / "qrels" / f"{split}.tsv"):
        # The dataset is registered: its own split names are safe to show, and the one asked for when it is a name.
        asked = repr(split) if is_model_name(split) else "of that name"
        have = ", ".join(_splits(path / "qrels")) or "none"
        raise UnknownDataset(f"gate.split: dataset {name!r} has no split {asked} (its splits: {have})")
    return path


def _regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _splits(qrels: Path) -> list[str]:
    try:
        names = [p for p in qrels.iterdir() if p.suffix == ".tsv" and is_model_name(p.stem)]
    except OSError:
        return []
    return sorted(p.stem for p in names if _regular_file(p))


def judged_set(data_dir: Path, gate: Mapping[str, Any]) -> JudgedSet:
    """The gate's queries and judgements: inline, or read from the registered dataset it names. Only judged
    queries count (as in `vela eval`)."""
    if gate.get("dataset"):
        split = str(gate.get("split") or "test")
        path = dataset_dir(data_dir, str(gate["dataset"]), split)
        queries, qrels = read_queries(path), read_qrels(path, split)
    else:
        queries = {str(k): str(v) for k, v in (gate.get("queries") or {}).items()}
        qrels = {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in (gate.get("qrels") or {}).items()}
    judged = {q: t for q, t in queries.items() if q in qrels}
    if not judged:
        raise ValueError("the gate's judged set has no query with judgements")
    return JudgedSet(judged, {q: qrels[q] for q in judged})


def ndcg_at_10(
    coll: Collection, embedder: Embedder | None, judged: JudgedSet, mode: Mode, fanout: Fanout, batch: int = 64
) -> float:
    """Mean NDCG@10 of one generation's published index over the judged queries, searched as the API searches
    (documents grouped, the collection's fusion for hybrid), scored in the order returned (ties as ranked, not
    by document id), as `vela eval` scores."""
    qids = list(judged.queries)
    run: Run = {}
    req = RankRequest(mode=mode, k=K, fusion=fusion_in_force(None, coll.settings.fusion))
    versions = coll.read_versions()
    for i in range(0, len(qids), batch):
        part = qids[i : i + batch]
        texts = [judged.queries[q] for q in part]
        qv = embedder.encode_queries(texts) if embedder is not None and mode != "bm25" else None
        fused = engine_search(coll, fanout, qv, texts, req, versions=versions)
        wanted = {pid: f.shard_of[pid] for f in fused for _, _, pid in f.top}
        passages = coll.passages(wanted)
        for qid, f in zip(part, fused, strict=True):
            docs = [p.doc_id for p in (passages.get(pid) for _, _, pid in f.top) if p is not None]
            run[qid] = ranked_scores(list(dict.fromkeys(docs)))  # first passage of each document, in rank order
    per_query = per_query_ndcg(judged.qrels, run)  # a query with no hit counts 0
    return sum(per_query.values()) / len(per_query)
