"""Hydrating passages from a doc store (DocStore.passages, and the commit's batches_after): each passage's slice
is cut in SQL by character offsets, as Python cuts it, and only the slice leaves SQLite; a document's metadata is
parsed once per call; the answers are those of the way before (the whole text sliced in Python)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.hydrate import CountingDocStore, main, passages_before
from indexing.docstore import DocStore, StoredDocument
from velaio.text import passage_text

# Code points of 1 to 4 UTF-8 bytes, a combining accent and a NUL (JSON text may hold one; SQLite's substr stops
# at it): character offsets past them differ from byte offsets.
MIXED = "Tides é 潮汐 🌊 e\u0301 end. " * 3 + "after\x00a NUL: ü 日本 🎉 " + "tail é 海流 " * 4


def _doc(doc_id: str, text: str, metadata: dict[str, object], step: int = 7) -> StoredDocument:
    spans = [(a, min(a + step + 3, len(text))) for a in range(0, len(text), step)]  # overlapping windows
    return StoredDocument(
        doc_id=doc_id,
        title=f"title of {doc_id} — é",
        text=text,
        metadata=metadata,
        content_hash=doc_id,
        spans=spans,
        embeddings=np.zeros((len(spans), 4), dtype=np.float32),
        context_id="",
    )


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    store = DocStore(tmp_path / "docs.sqlite3")
    store.upsert(
        [
            _doc("mixed", MIXED, {"k": "v", "nested": {"l": [1, 2.5, "é"]}}),
            _doc("nul-first", "\x00" + MIXED, {"k": "nul"}),
            _doc("ascii", "plain words only " * 5, {}),
        ]
    )
    return store


def _all_pids(store: DocStore) -> list[int]:
    return [int(r[0]) for r in store._conn().execute("SELECT pid FROM passages ORDER BY pid")]


def test_each_passage_is_its_character_span_of_the_text(store: DocStore) -> None:
    texts = {"mixed": MIXED, "nul-first": "\x00" + MIXED, "ascii": "plain words only " * 5}
    hits = store.passages(_all_pids(store))
    assert len(hits) == len(_all_pids(store))
    for pid, hit in hits.items():
        assert hit.pid == pid
        assert hit.text == texts[hit.doc_id][hit.start : hit.end]
        assert hit.title == f"title of {hit.doc_id} — é"
    assert any(not hit.text.isascii() for hit in hits.values())
    assert any("\x00" in hit.text for hit in hits.values())


def test_answers_equal_the_whole_text_sliced_in_python(store: DocStore) -> None:
    pids = _all_pids(store)
    assert store.passages(pids) == passages_before(store, pids)
    assert store.passages(pids[::3] + [10**9]) == passages_before(store, pids[::3])  # an unknown pid is left out
    assert store.passages([]) == {}


def test_passages_of_one_document_share_its_metadata_parsed_once(store: DocStore) -> None:
    hits = list(store.passages(_all_pids(store)).values())
    mixed = [h for h in hits if h.doc_id == "mixed"]
    assert len(mixed) > 2
    assert all(h.metadata is mixed[0].metadata for h in mixed)
    assert mixed[0].metadata == {"k": "v", "nested": {"l": [1, 2.5, "é"]}}
    other = next(h for h in hits if h.doc_id == "nul-first")
    assert other.metadata is not mixed[0].metadata and other.metadata == {"k": "nul"}


def test_the_commit_reads_each_passage_as_its_character_span(store: DocStore) -> None:
    """batches_after feeds BM25 at each commit: past a NUL character it used to read empty passages."""
    spans = {
        int(pid): (title, text[a:b], json.loads(meta))
        for pid, title, text, a, b, meta in store._conn().execute(
            "SELECT p.pid, d.title, d.text, p.start, p.end, d.metadata FROM passages p JOIN documents d USING (doc_id)"
        )
    }
    seen = 0
    for batch in store.batches_after(-1, batch_size=5):
        for pid, text, meta in zip(batch.pids.tolist(), batch.texts, batch.metadata, strict=True):
            title, passage, metadata = spans[pid]
            assert text == passage_text(title, passage)
            assert json.loads(meta) == metadata
            seen += 1
    assert seen == len(spans)


def test_a_hit_moves_its_passage_not_its_document(tmp_path: Path) -> None:
    store = CountingDocStore(tmp_path / "docs.sqlite3")
    big = "é" * 500_000 + "潮" * 250_000  # 1.75 MB of UTF-8
    store.upsert([_doc("big", big, {"m": 1}, step=100_000)])
    pids = _all_pids(store)[:3]
    store.counter.bytes = 0
    hits = store.passages(pids)
    assert [h.text for h in hits.values()] == [big[h.start : h.end] for h in hits.values()]
    slices = sum(len(h.text.encode()) for h in hits.values())
    assert store.counter.bytes <= slices + 1024  # the slices, their ids, title and metadata: not 3 x 1.75 MB


def test_the_benchmark_compares_both_ways_and_finds_them_equal(tmp_path: Path) -> None:
    out = tmp_path / "hydrate.json"
    result = main(["--docs", "8", "--doc-kb", "5", "--k", "6", "--calls", "2", "--repeats", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == result
    assert result["all_equal"] and set(result["shapes"]) == {"spread", "clustered"}
    for shape in result["shapes"].values():
        assert shape["bytes_ratio"] > 1 and shape["now"]["bytes_read_per_call"] > 0
        assert "time_ratio" in shape  # its value is a timing: the bench reports it, no test asserts it
    assert result["command"] and result["machine"]["cpu"]["model"]
