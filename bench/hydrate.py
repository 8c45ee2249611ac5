"""Hydrating search hits (DocStore.passages) as it is, against the way it was, in one run on one doc store.

Now: each passage's own slice of its document is cut in SQL (substr), and each document's title and metadata are
read and parsed once per call, whatever number of its passages are hits. Before (kept here as
`passages_before`): the whole text of the document was selected for every passage and sliced in Python, and
the metadata was read and parsed once per passage.

Corpus: `--docs` documents of about `--doc-kb` KB of text each (words from a fixed vocabulary, some of them
non-ASCII, so that character and byte offsets differ), cut into passages of about 1,000 characters, each with
about 1 KB of metadata, in a fresh doc store (vectors of 8 dimensions: hydration does not read them). Two shapes of
call, `--calls` each, of `--k` passage ids drawn with a fixed seed:
    spread     k passages of k different documents (the usual top-k of a search)
    clustered  k passages of 5 documents (grouping off, or a few long documents that match well)
Per call: the median time of each way (timed alternately, after one untimed pass of both), and the bytes of the
values SQLite hands to Python (text as UTF-8), counted in a separate pass. Ratios are before / now. Every call's
answers of the two ways are compared field by field (`equal`).

    python -m bench.hydrate --out bench/results/hydrate.json
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from bench.common import command, machine, write_result
from indexing.docstore import DocStore, PassageHit, StoredDocument

PASSAGE_CHARS = 1000
WORDS = ["tide", "moon", "ocean", "current", "wave", "salt", "shore", "été", "côte", "marée", "潮汐", "海流"]


class ReadCounter:
    """Bytes of the values a doc store's queries hand to Python: text as UTF-8, blobs as they are."""

    def __init__(self) -> None:
        self.bytes = 0

    def add(self, row: Sequence[Any] | None) -> None:
        for value in row or ():
            if isinstance(value, str):
                self.bytes += len(value.encode("utf-8", "surrogatepass"))
            elif isinstance(value, bytes | bytearray | memoryview):
                self.bytes += len(value)


class _CountingCursor:
    def __init__(self, cursor: sqlite3.Cursor, counter: ReadCounter) -> None:
        self._cursor, self._counter = cursor, counter

    def fetchone(self) -> Any:
        row = self._cursor.fetchone()
        self._counter.add(row)
        return row

    def fetchall(self) -> list[Any]:
        rows = self._cursor.fetchall()
        for row in rows:
            self._counter.add(row)
        return rows

    def __iter__(self) -> Iterator[Any]:
        for row in self._cursor:
            self._counter.add(row)
            yield row


class _CountingConnection:
    def __init__(self, conn: sqlite3.Connection, counter: ReadCounter) -> None:
        self._conn, self._counter = conn, counter

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _CountingCursor:
        return _CountingCursor(self._conn.execute(sql, params), self._counter)

    def __getattr__(self, name: str) -> Any:  # in_transaction and the rest, as the connection has them
        return getattr(self._conn, name)


class CountingDocStore(DocStore):
    """A DocStore whose reads count what they move into Python (`counter`), for the benchmark and tests."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.counter = ReadCounter()

    def _conn(self) -> sqlite3.Connection:
        return cast(sqlite3.Connection, _CountingConnection(super()._conn(), self.counter))


def passages_before(store: DocStore, pids: Sequence[int]) -> dict[int, PassageHit]:
    """DocStore.passages as it was: the whole document text selected per passage and sliced in Python, the
    document's metadata parsed per passage."""
    rows = store._select_in(
        "SELECT p.pid, p.doc_id, p.idx, p.start, p.end, d.title, d.text, d.metadata "
        "FROM passages p JOIN documents d ON d.doc_id = p.doc_id WHERE p.pid IN ({marks})",
        [int(p) for p in pids],
    )
    return {
        pid: PassageHit(pid, doc_id, idx, start, end, title, text[start:end], json.loads(meta))
        for pid, doc_id, idx, start, end, title, text, meta in rows
    }


def corpus(n_docs: int, doc_chars: int, seed: int = 0) -> list[StoredDocument]:
    """Documents of about `doc_chars` characters with passages of PASSAGE_CHARS (character offsets)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_docs):
        words = rng.choice(WORDS, size=doc_chars // 5)
        text = " ".join(words.tolist())[:doc_chars]
        spans = [(a, min(a + PASSAGE_CHARS, len(text))) for a in range(0, len(text), PASSAGE_CHARS)]
        metadata = {"tenant": f"t{i % 17}", "year": 2000 + i % 25, "tags": [f"tag-{i}-{j}" for j in range(60)]}
        out.append(
            StoredDocument(
                doc_id=f"doc-{i:05d}",
                title=f"Document {i} — marées",
                text=text,
                metadata=metadata,
                content_hash=str(i),
                spans=spans,
                embeddings=np.zeros((len(spans), 8), dtype=np.float32),
                context_id="",
            )
        )
    return out


def calls(store: DocStore, shape: str, n_calls: int, k: int, seed: int) -> list[list[int]]:
    """Passage id lists of one shape: `spread` (k documents, a random passage of each) or `clustered` (k random
    passages of 5 documents)."""
    rng = np.random.default_rng(seed)
    by_doc: dict[str, list[int]] = {}
    for pid, doc_id in store._conn().execute("SELECT pid, doc_id FROM passages ORDER BY pid"):
        by_doc.setdefault(doc_id, []).append(int(pid))
    docs = [by_doc[d] for d in sorted(by_doc)]
    out = []
    for _ in range(n_calls):
        if shape == "spread":
            chosen = rng.choice(len(docs), size=min(k, len(docs)), replace=False)
            out.append([int(rng.choice(docs[d])) for d in chosen])
        else:
            chosen = rng.choice(len(docs), size=min(5, len(docs)), replace=False)
            pool = [pid for d in chosen for pid in docs[d]]
            out.append([int(p) for p in rng.choice(pool, size=min(k, len(pool)), replace=False)])
    return out


def _time_calls(hydrate: Callable[[Sequence[int]], Any], runs: list[list[int]], times: list[float]) -> None:
    for pids in runs:
        t0 = time.perf_counter()
        hydrate(pids)
        times.append((time.perf_counter() - t0) * 1000.0)


def measure(store: CountingDocStore, runs: list[list[int]], repeats: int) -> dict[str, Any]:
    """Both ways over the same calls: equal answers, bytes read and median time per call."""

    def before(pids: Sequence[int]) -> dict[int, PassageHit]:
        return passages_before(store, pids)

    ways: dict[str, Callable[[Sequence[int]], Any]] = {"before": before, "now": store.passages}
    equal = all(before(pids) == store.passages(pids) for pids in runs)  # also the untimed warm-up pass
    read: dict[str, int] = {}
    for name, hydrate in ways.items():
        store.counter.bytes = 0
        for pids in runs:
            hydrate(pids)
        read[name] = store.counter.bytes // len(runs)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats):  # alternated: whatever the machine does meanwhile falls on both
        for name, hydrate in ways.items():
            _time_calls(hydrate, runs, times[name])
    ms = {name: statistics.median(t) for name, t in times.items()}
    return {
        "before": {"ms_per_call_p50": round(ms["before"], 3), "bytes_read_per_call": read["before"]},
        "now": {"ms_per_call_p50": round(ms["now"], 3), "bytes_read_per_call": read["now"]},
        "time_ratio": round(ms["before"] / ms["now"], 1),
        "bytes_ratio": round(read["before"] / read["now"], 1),
        "equal": equal,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=300, help="documents in the doc store")
    ap.add_argument("--doc-kb", type=int, default=200, help="characters of each document's text, in thousands")
    ap.add_argument("--k", type=int, default=100, help="passages hydrated per call")
    ap.add_argument("--calls", type=int, default=20, help="calls of each shape")
    ap.add_argument("--repeats", type=int, default=3, help="timed passes over the calls")
    ap.add_argument("--out", type=Path, default=Path("bench/results/hydrate.json"))
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="vela-hydrate-") as tmp:
        store = CountingDocStore(Path(tmp) / "docs.sqlite3")
        docs = corpus(args.docs, args.doc_kb * 1000)
        for i in range(0, len(docs), 50):
            store.upsert(docs[i : i + 50])
        n_docs, n_passages = store.counts()
        text_bytes = sum(len(d.text.encode()) for d in docs) / len(docs)
        del docs
        shapes = {
            shape: measure(store, calls(store, shape, args.calls, args.k, seed), args.repeats)
            for seed, shape in enumerate(("spread", "clustered"))
        }
        store.close()
    result = {
        "benchmark": "hydrate",
        "documents": n_docs,
        "passages": n_passages,
        "document_text_bytes_mean": round(text_bytes),
        "k": args.k,
        "calls": args.calls,
        "repeats": args.repeats,
        "shapes": shapes,
        "all_equal": all(s["equal"] for s in shapes.values()),
        "machine": machine(),
        "command": command(),
    }
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
