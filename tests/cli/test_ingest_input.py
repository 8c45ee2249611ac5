"""Reading a corpus for `vela ingest`: the checking pass that keeps only id hashes, and the cut into jobs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import cli.ingest_input
from cli.ingest_input import BadInput, check_corpus, job_batches
from service.settings import Settings


def _docs(n: int) -> list[dict[str, Any]]:
    return [{"id": f"d{i}", "text": f"text {i}"} for i in range(n)]


def test_the_check_counts_and_refuses_a_repeat_anywhere(tmp_path: Path) -> None:
    docs = _docs(30)
    assert check_corpus(tmp_path, lambda: iter(docs), Settings()) == 30
    with pytest.raises(BadInput, match=r"id 'd4' is given twice \(documents 5 and 31\)"):
        check_corpus(tmp_path, lambda: iter([*docs, {"id": "d4", "text": "again"}]), Settings())
    with pytest.raises(BadInput, match="holds no documents"):
        check_corpus(tmp_path, lambda: iter([]), Settings())


def test_equal_hashes_of_different_ids_are_no_repeat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every id hashed alike: the ids are compared themselves before anything is refused."""
    monkeypatch.setattr(cli.ingest_input, "_id_hash", lambda _id: 7)
    docs = _docs(20)
    assert check_corpus(tmp_path, lambda: iter(docs), Settings()) == 20
    with pytest.raises(BadInput, match=r"id 'd9' is given twice \(documents 10 and 21\)"):
        check_corpus(tmp_path, lambda: iter([*docs, {"id": "d9", "text": "again"}]), Settings())


def test_metadata_out_of_bounds_is_refused_naming_the_document(tmp_path: Path) -> None:
    docs = [*_docs(3), {"id": "deep", "text": "x", "metadata": {"k": "v" * 100}}]
    with pytest.raises(BadInput, match=r"document 4 \(id 'deep'\): metadata is \d+ bytes as JSON"):
        check_corpus(tmp_path, lambda: iter(docs), Settings(max_metadata_bytes=64))


def test_jobs_hold_at_most_max_docs_and_max_bytes_of_json() -> None:
    docs = [{"id": f"d{i}", "text": "x" * (10 * (i % 7) + 1)} for i in range(200)]
    docs[50]["text"] = "long " * 200  # over the byte bound alone: a job of its own
    batches = list(job_batches(iter(docs), 12, 400))
    assert [d for b in batches for d in b] == docs  # every document once, in order
    assert all(len(b) <= 12 for b in batches)
    assert all(len(json.dumps(b)) <= 400 for b in batches if len(b) > 1)
    assert [docs[50]] in batches
    assert [len(b) for b in job_batches(iter(_docs(25)), 10, 10**9)] == [10, 10, 5]
