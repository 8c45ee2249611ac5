"""Reading a BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv; query-id lists.

Here, in the leaf package, so that training, bench and cli read datasets without importing each other. Every
fault in a file is a ValueError naming the file and the line, so that each caller reports it in one line."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from velaio.files import write_atomic
from velaio.lines import json_objects, parse_json_line, text_lines

QRELS_COLUMNS = ("query-id", "corpus-id", "score")


def read_corpus(root: Path) -> Iterator[dict[str, Any]]:
    """Documents as the API takes them: {id, title, text}."""
    path = root / "corpus.jsonl"
    for n, d in json_objects(path, "a document"):
        doc_id = _id(path, n, d, "document")
        title, text = (_text(path, n, d, key) for key in ("title", "text"))
        # The API refuses empty texts; a title-only document keeps its title as text.
        yield {"id": doc_id, "title": title, "text": text if text.strip() else title or "(empty)"}


def read_queries(root: Path) -> dict[str, str]:
    path = root / "queries.jsonl"
    queries: dict[str, str] = {}
    for n, q in json_objects(path, "a query"):
        if not isinstance(q.get("text"), str):
            raise ValueError(f"{path}:{n}: the query has no text (a string `text` field)")
        queries[_id(path, n, q, "query")] = q["text"]
    return queries


def read_qrels(root: Path, split: str) -> dict[str, dict[str, int]]:
    """Graded judgements; negative grades (Cranfield's -1) count as not relevant."""
    path = root / "qrels" / f"{split}.tsv"
    qrels: dict[str, dict[str, int]] = {}
    where: list[int] = []  # the columns' positions, from the header line
    width = 0
    for n, line in text_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if not where:
            names = [f.strip() for f in fields]
            if not set(QRELS_COLUMNS) <= set(names):
                raise ValueError(
                    f"{path}:{n}: the header line must name the columns {', '.join(QRELS_COLUMNS)} "
                    f"(tab-separated); got {line[:80]!r}"
                )
            where, width = [names.index(c) for c in QRELS_COLUMNS], len(names)
            continue
        if len(fields) <= max(where):
            raise ValueError(f"{path}:{n}: {len(fields)} tab-separated fields, expected {width}")
        qid, doc_id, raw = (fields[i] for i in where)
        try:
            score = float(raw)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise ValueError(f"{path}:{n}: the score {raw[:40]!r} is not a number")
        qrels.setdefault(qid, {})[doc_id] = max(0, int(score))
    return qrels


def read_query_ids(path: Path) -> set[str]:
    """A query-id list (e.g. a reranker's held-out dev queries): one id per line; blanks and '#' comments skipped."""
    lines = (line.split("#", 1)[0].strip() for _, line in text_lines(path))
    return {line for line in lines if line}


def write_query_ids(path: Path, qids: list[str]) -> None:
    write_atomic(path, "".join(f"{q}\n" for q in qids).encode())


def read_query_texts(path: Path) -> list[str]:
    """Unlabelled queries (a query log, or a BEIR queries.jsonl): one per line, a JSON line's `text` where a line
    is a JSON object; blank lines skipped, duplicates kept once, in file order."""
    out: dict[str, None] = {}
    for n, raw in text_lines(path):
        line = raw.strip()
        if line.startswith("{"):
            value = parse_json_line(path, n, line).get("text")
            line = value.strip() if isinstance(value, str) else ""
        if line:
            out.setdefault(line, None)
    return list(out)


def _id(path: Path, n: int, item: dict[str, Any], what: str) -> str:
    value = item.get("_id")
    if value is None or isinstance(value, (dict, list)) or str(value) == "":
        raise ValueError(f"{path}:{n}: the {what} has no id (a string or number `_id` field)")
    return str(value)


def _text(path: Path, n: int, doc: dict[str, Any], key: str) -> str:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{path}:{n}: the document's {key} is a {type(value).__name__}, not a string")
    return value or ""
