"""Reading a corpus for `vela ingest` and `vela eval`: the documents of a BEIR folder or a JSONL file, checked as
`POST /index` checks a request, and, for `vela ingest`, cut into jobs of bounded size.

`vela ingest` reads its input twice so that memory follows a job, not the corpus: `check_corpus` reads every
document and keeps only an 8-byte hash of its id, refusing the input before anything is written; `job_batches`
then streams the documents again, one job's worth at a time. `vela eval` keeps its corpus in memory anyway (it
needs every id to mirror the collection), so it loads the whole list with `load_documents`."""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any


class BadInput(ValueError):
    """The input cannot be ingested as it is: the message names the line or document."""


def read_documents(path: Path) -> Iterator[dict[str, Any]]:
    """A BEIR folder (corpus.jsonl with _id), or a JSONL file of API documents ({id, text, title?, metadata?}).
    A JSONL line is checked as `POST /index` checks a document. Every fault is a ValueError naming the line."""
    from velaio.lines import json_objects

    if path.is_dir():
        from velaio.beir import read_corpus

        if not (path / "corpus.jsonl").is_file():
            raise BadInput(f"{path} is a folder without corpus.jsonl: give a BEIR folder or a JSONL file")
        yield from read_corpus(path)
        return
    if not path.is_file():
        raise BadInput(f"no file or folder {path}")
    from pydantic import ValidationError

    from service.schemas import Document

    for n, d in json_objects(path, "a document"):
        raw_id = d.get("id", d.get("_id"))
        if raw_id is None:
            raise BadInput(f"{path}:{n}: the document has no id (an `id` or `_id` field)")
        doc = {"id": str(raw_id), **{k: v for k, v in d.items() if k in ("title", "text", "metadata")}}
        try:
            Document.model_validate(doc)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
            raise BadInput(f"{path}:{n} (id {doc['id'][:100]!r}): {problems}") from None
        yield doc


def _metadata_refusal(source: Path, i: int, doc: dict[str, Any], settings: Any) -> BadInput | None:
    from service.limits import metadata_problem

    problem = metadata_problem(doc.get("metadata"), settings)
    return None if problem is None else BadInput(f"{source}: document {i + 1} (id {doc['id'][:100]!r}): {problem}")


def _twice(source: Path, doc_id: str, first: int, again: int) -> BadInput:
    return BadInput(f"{source}: id {doc_id[:100]!r} is given twice (documents {first + 1} and {again + 1})")


def load_documents(source: Path, docs: Iterable[dict[str, Any]], settings: Any) -> list[dict[str, Any]]:
    """All documents, refused as `POST /index` refuses a request: none at all, a repeated id (which one would
    win?) or metadata out of the server's bounds. `vela eval` loads its corpus through here."""
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, d in enumerate(docs):
        if d["id"] in seen:
            raise _twice(source, d["id"], seen[d["id"]], i)
        seen[d["id"]] = i
        if (refused := _metadata_refusal(source, i, d, settings)) is not None:
            raise refused
        out.append(d)
    if not out:
        raise BadInput(f"{source} holds no documents")
    return out


def _id_hash(doc_id: str) -> int:
    """A 64-bit hash of an id, the same for the same id within this process (all that the check needs)."""
    return hash(doc_id)


def check_corpus(source: Path, read: Callable[[], Iterable[dict[str, Any]]], settings: Any) -> int:
    """How many documents `read()` yields, after refusing them as `load_documents` does, without holding them.

    Repeated ids are found across the whole input with 8 bytes a document: a hash of every id, sorted once at
    the end (a set of the ids themselves costs about a hundred bytes each, close to a gigabyte for MS MARCO's 8.8
    million passages). Only when two hashes are equal is the input read again, keeping the ids of those hashes
    alone, to name the id and both documents; equal hashes of different ids are let through."""
    import numpy as np

    hashes = array("q")
    for i, d in enumerate(read()):
        if (refused := _metadata_refusal(source, i, d, settings)) is not None:
            raise refused
        hashes.append(_id_hash(d["id"]))
    if not hashes:
        raise BadInput(f"{source} holds no documents")
    ordered = np.sort(np.frombuffer(hashes, dtype=np.int64))
    equal = ordered[1:][ordered[1:] == ordered[:-1]]
    if equal.size:
        suspects = set(equal.tolist())
        seen: dict[str, int] = {}
        for i, d in enumerate(read()):
            if _id_hash(d["id"]) in suspects:
                if d["id"] in seen:
                    raise _twice(source, d["id"], seen[d["id"]], i)
                seen[d["id"]] = i
    return len(hashes)


def job_batches(docs: Iterable[dict[str, Any]], max_docs: int, max_bytes: int) -> Iterator[list[dict[str, Any]]]:
    """Consecutive runs of at most `max_docs` documents whose payload, as the job store records it (a JSON
    array), is at most `max_bytes`; a document larger than that alone makes a job of its own. The caller
    may empty a list once it has recorded it: the next one is a new list."""
    batch: list[dict[str, Any]] = []
    size = 2  # "[]"
    for doc in docs:
        # json.dumps escapes non-ASCII by default, as the job store writes it: characters are bytes here.
        n = len(json.dumps(doc))
        if batch and (len(batch) >= max_docs or size + 2 + n > max_bytes):  # 2: the ", " before it
            yield batch
            batch, size = [], 2
        size += n + (2 if batch else 0)
        batch.append(doc)
    if batch:
        yield batch
