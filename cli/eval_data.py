"""What `vela eval` reads before it ingests: the dataset (checked whole, as `vela ingest` checks a corpus), the
name of its collection, and whether a baseline results JSON was scored on the same dataset."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.ingest_input import load_documents
from cli.model_names import ModelChoice, resolve_model
from velaio.beir import read_corpus, read_qrels, read_queries, read_query_ids


@dataclass
class EvalData:
    qrels: dict[str, dict[str, int]]  # the scored queries' judgements only
    queries: dict[str, str]
    qids: list[str]  # the scored queries, in qrels order
    docs: list[dict[str, Any]]


def load_eval_data(data: Path, split: str, query_ids: Path | None, settings: Any) -> EvalData:
    """Every file of the dataset read and checked before anything is created: a fault is a ValueError naming the
    file and the line; an empty corpus, a repeated document id, or ids that match no query are refused."""
    qrels = read_qrels(data, split)
    queries = read_queries(data)
    qids = [q for q in qrels if q in queries]
    if not qids:  # nothing to score: the whole corpus would be ingested for a table of NaN
        where = f"{data}/qrels/{split}.tsv"
        why = "judges no query" if not qrels else f"judges {len(qrels)} queries, none of them in queries.jsonl"
        raise ValueError(f"--split: {where} {why}: nothing to score")
    if query_ids is not None:  # a subset, e.g. a reranker's held-out dev queries (training's dev_queries.txt)
        wanted = read_query_ids(query_ids)
        qids = [q for q in qids if q in wanted]
        if not qids:
            raise ValueError(f"--query-ids: none of the ids in {query_ids} is a {split} query of {data}")
        if len(qids) < len(wanted):
            print(
                f"vela eval: --query-ids: {len(wanted) - len(qids)} of {len(wanted)} ids are not {split} queries of "
                f"{data.name}: left out",
                file=sys.stderr,
            )
        qrels = {q: qrels[q] for q in qids}  # the mean is over these queries only (a missing run counts as 0)
    docs = load_documents(data / "corpus.jsonl", read_corpus(data), settings)
    return EvalData(qrels=qrels, queries=queries, qids=qids, docs=docs)


def pick_models(embedder: str | None, rerank: str | None, settings: Any) -> tuple[ModelChoice, ModelChoice | None]:
    """The embedder (--embedder, else VELA_EMBEDDER) and the reranker (--rerank), named as every offline command
    names a model (cli/model_names.py); ModelRefused, one line naming the flag, before anything is read."""
    flag = "--embedder" if embedder else "VELA_EMBEDDER"
    emb = resolve_model(embedder or settings.embedder, kind="embedder", flag=flag)
    return emb, resolve_model(rerank, kind="reranker", flag="--rerank") if rerank else None


def collection_name(data: Path, model_dir: str, shards: int) -> str:
    """The dataset's name (readable in `vela` listings) and digests of its resolved folder and of the embedder:
    two folders of the same name, or one folder with two embedders, never share a collection."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", data.name).lstrip("._-")[:40] or "data"
    where = hashlib.sha1(str(data.resolve()).encode()).hexdigest()[:8]
    model = hashlib.sha1(model_dir.encode()).hexdigest()[:8]
    return f"{stem}-{where}-{model}" + (f"-s{shards}" if shards > 1 else "")


def dataset_problem(data: Path, split: str) -> str | None:
    """Why `data` is not a BEIR folder with judgements for `split`, or None."""
    if not data.is_dir():
        return f"--data: no folder {data}" if not data.exists() else f"--data: {data} is a file, not a BEIR folder"
    missing = [f for f in ("corpus.jsonl", "queries.jsonl") if not (data / f).is_file()]
    if missing:
        return f"--data: {data} has no {' or '.join(missing)}: not a BEIR folder"
    if not (data / "qrels" / f"{split}.tsv").is_file():
        splits = sorted(p.stem for p in (data / "qrels").glob("*.tsv")) if (data / "qrels").is_dir() else []
        return f"--split: {data} has no qrels/{split}.tsv (splits there: {', '.join(splits) or 'none'})"
    return None


def query_set(qids: list[str]) -> str:
    """A digest of the scored queries (order aside), kept in the results JSON: a baseline scored on another set
    (another --query-ids file, or none) is told apart from this one's."""
    return hashlib.sha1("\n".join(sorted(qids)).encode()).hexdigest()[:16]


def other_queries(baseline: Path, qids: list[str], query_ids: Path | None) -> str | None:
    """Why a results JSON baseline was scored on other queries of the same dataset and split than `qids` (None:
    the same, or not a results JSON): its `query_set`, or where an older file has none, its count of queries."""
    if baseline.suffix != ".json" or not baseline.is_file():
        return None
    result = json.loads(baseline.read_text())  # readable: check_baseline has read it
    theirs, count = result.get("query_set"), result.get("queries")
    if theirs == query_set(qids) or (theirs is None and (not isinstance(count, int) or count == len(qids))):
        return None
    subset = f"--query-ids {result['query_ids']}" if result.get("query_ids") else "all of them"
    ours = f"--query-ids {query_ids}" if query_ids is not None else "all of them"
    return (
        f"{baseline} scored {count} queries ({subset}), this evaluation {len(qids)} ({ours}): "
        "its figures are not comparable"
    )


def other_dataset(baseline: Path, data: Path, split: str) -> str | None:
    """Why a results JSON baseline was scored on other queries than this evaluation's (None: the same dataset
    and split, or not a results JSON). Its figures would stand beside this run's as if comparable."""
    if baseline.suffix != ".json" or not baseline.is_file():
        return None
    result = json.loads(baseline.read_text())  # readable: check_baseline has read it
    dataset, their_split = result.get("dataset"), result.get("split", split)
    if dataset is None or (dataset, their_split) == (data.name, split):
        return None  # a results JSON that names no dataset cannot be told apart
    return (
        f"{baseline} scored dataset {dataset!r} (split {their_split!r}), this evaluation {data.name!r} "
        f"(split {split!r}): its figures are not comparable"
    )
