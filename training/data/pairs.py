"""Training pairs (query, positive document) from labelled qrels or mined from any corpus without labels.

Sources are strings so they fit a config file and a command line:
    qrels:<beir dir>[:<split>]      every judged-relevant (query, document) of the split (default train)
    mine:<beir dir or .jsonl>       self-supervised: title -> body, and first sentence -> rest of the text
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from velaio.text import passage_text

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
MIN_WORDS = 3  # a mined query shorter than this says too little to train on


@dataclass(frozen=True)
class Pair:
    query: str
    document: str  # what the embedder reads: title + newline + text, as the indexer builds passages
    query_id: str
    doc_id: str


def _read_jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def read_documents(source: Path) -> dict[str, tuple[str, str]]:
    """doc id -> (title, text) from a BEIR folder (corpus.jsonl) or a JSONL file of {_id|id, title, text}."""
    path = source / "corpus.jsonl" if source.is_dir() else source
    docs = {}
    for d in _read_jsonl(path):
        docs[str(d.get("_id", d.get("id")))] = (d.get("title") or "", d.get("text") or "")
    return docs


def qrels_pairs(root: Path, split: str = "train") -> list[Pair]:
    docs = read_documents(root)
    queries = {str(q["_id"]): q["text"] for q in _read_jsonl(root / "queries.jsonl")}
    pairs = []
    with open(root / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        header = f.readline().split("\t")
        if header[0].strip() != "query-id":
            raise ValueError(f"{root}/qrels/{split}.tsv: expected a BEIR header (query-id, corpus-id, score)")
        for line in f:
            qid, did, score = line.rstrip("\n").split("\t")[:3]
            if float(score) > 0 and qid in queries and did in docs:
                pairs.append(Pair(queries[qid], passage_text(*docs[did]), qid, did))
    return pairs


def mined_pairs(source: Path) -> list[Pair]:
    """Pairs with no labels: a titled document gives (title, body); a text of two or more sentences gives
    (first sentence, the rest). Each document counts once per kind, its id shared, so both of its pairs are
    never each other's negative."""
    pairs = []
    for did, (title, text) in read_documents(source).items():
        if title and len(title.split()) >= MIN_WORDS and text.strip():
            pairs.append(Pair(title, text, f"title:{did}", did))
        parts = SENTENCE_END.split(text.strip(), maxsplit=1)
        if len(parts) == 2 and len(parts[0].split()) >= MIN_WORDS and parts[1].strip():
            pairs.append(Pair(parts[0], passage_text(title, parts[1]), f"sent:{did}", did))
    return pairs


def load_pairs(sources: Sequence[str]) -> list[Pair]:
    out: list[Pair] = []
    for source in sources:
        kind, _, rest = source.partition(":")
        if kind == "qrels":
            path, _, split = rest.partition(":")
            out.extend(qrels_pairs(Path(path), split or "train"))
        elif kind == "mine":
            out.extend(mined_pairs(Path(rest)))
        else:
            raise ValueError(f"unknown pair source {source!r}: use qrels:<dir>[:split] or mine:<dir|jsonl>")
    if not out:
        raise ValueError(f"no training pairs in {list(sources)}")
    return out
