"""Reading a BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv; query-id lists.

Here, in the leaf package, so that training, bench and cli read datasets without importing each other."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from velaio.files import write_atomic


def read_corpus(root: Path) -> Iterator[dict[str, Any]]:
    """Documents as the API takes them: {id, title, text}."""
    with open(root / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                text = d.get("text") or ""
                title = d.get("title") or ""
                # The API refuses empty texts; a title-only document keeps its title as text.
                yield {"id": str(d["_id"]), "title": title, "text": text if text.strip() else title or "(empty)"}


def read_queries(root: Path) -> dict[str, str]:
    with open(root / "queries.jsonl", encoding="utf-8") as f:
        return {str(q["_id"]): q["text"] for q in map(json.loads, filter(str.strip, f))}


def read_qrels(root: Path, split: str) -> dict[str, dict[str, int]]:
    """Graded judgements; negative grades (Cranfield's -1) count as not relevant."""
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = max(0, int(float(row["score"])))
    return qrels


def read_query_ids(path: Path) -> set[str]:
    """A query-id list (e.g. a reranker's held-out dev queries): one id per line; blanks and '#' comments skipped."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {line for line in lines if line}


def write_query_ids(path: Path, qids: list[str]) -> None:
    write_atomic(path, "".join(f"{q}\n" for q in qids).encode())


def read_query_texts(path: Path) -> list[str]:
    """Unlabelled queries (a query log, or a BEIR queries.jsonl): one per line, a JSON line's `text` where a line
    is a JSON object; blank lines skipped, duplicates kept once, in file order."""
    out: dict[str, None] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                value = json.loads(line).get("text")
                line = value.strip() if isinstance(value, str) else ""
            if line:
                out.setdefault(line, None)
    return list(out)
