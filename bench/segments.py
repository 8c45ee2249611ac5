"""Search over 10 segments vs 1: SciFact in one commit and in ten commits (merges off), same answers, same speed.

Two collections of one data directory hold the same documents with the same passage ids: "one" got every
document in one commit (1 segment), "ten" the same documents in 10 commits with no merge in between
(10 segments). Documents are chunked and embedded once (cached under .vela-bench/), then stored into both.

1. Equivalence: for every test query, top-10 of bm25, dense and hybrid are equal in both (ids, passage ids,
   order, and scores to 1e-6).
2. Latency: `service.search.search_batch` (the service's in-process search: engine call + hydration), one
   query per call. Query vectors are encoded once up front and handed in by a pre-encoded encoder, so the
   timings hold the engine and hydration only (the encoder is the same for both and would only dilute the
   ratio; its own p50 is reported beside). Collections alternate query by query (ABBA order), over
   `--rounds` rounds of all test queries; the figure is p50(ten) / p50(one) per mode (target <= 1.15).
   Measured three ways in one run: FAISS with its default OpenMP threads (as the service runs), FAISS at
   one thread, and (dense, hybrid; one round) with the real query encoder inside search_batch.

    vela bench segments --out bench/results/segments.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import command, machine, write_result
from indexing.ranking import Mode

REPO = Path(__file__).resolve().parents[1]
BEIR = REPO.parent / "shared" / "data" / "beir"
CACHE = REPO / ".vela-bench"
MODES: tuple[Mode, ...] = ("bm25", "dense", "hybrid")


class PreEncoded:
    """A query encoder that hands back vectors computed once (search_batch's QueryEncoder protocol)."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def encode_queries(self, texts: Sequence[str], *, context: Any = None) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])  # (nq, d)


def read_scifact(beir: Path, limit: int | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Corpus documents ({"id", "title", "text"}) and the test queries' texts."""
    from velaio.beir import read_corpus, read_qrels, read_queries

    root = beir / "scifact"
    docs = list(read_corpus(root))
    queries = read_queries(root)
    test = [queries[q] for q in read_qrels(root, "test") if q in queries]
    return (docs[:limit], test[: max(1, limit // 10)]) if limit else (docs, test)


def prepared(docs: list[dict[str, Any]], embedder_name: str, chunking: Any, cache: Path | None) -> list[Any]:
    """StoredDocuments (chunked + embedded), cached (JSON lines + one .npy) by corpus, embedder and chunking."""
    from indexing.docstore import StoredDocument
    from indexing.prepare import chunk_and_embed
    from models import EmbedderCache

    key = hashlib.sha256(repr((embedder_name, chunking, [(d["id"], d["text"]) for d in docs])).encode())
    folder = (cache or Path()) / f"prepared-{key.hexdigest()[:16]}"  # used only with a cache
    if cache is not None and (folder / "done").exists():
        vecs = np.load(folder / "embeddings.npy")  # (P, d)
        out, row = [], 0
        for line in (folder / "docs.jsonl").read_text().splitlines():
            d = json.loads(line)
            n = len(d["spans"])
            spans = [(int(a), int(b)) for a, b in d["spans"]]
            out.append(
                StoredDocument(d["id"], d["title"], d["text"], d["metadata"], d["hash"], spans, vecs[row : row + n])
            )
            row += n
        return out
    embedder = EmbedderCache().get(embedder_name)
    out = []
    for start in range(0, len(docs), 256):
        out.extend(chunk_and_embed(docs[start : start + 256], chunking=chunking, embedder=embedder))
    if cache is None:
        return out
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "embeddings.npy", np.concatenate([d.embeddings for d in out]))
    rows = [
        {
            "id": d.doc_id,
            "title": d.title,
            "text": d.text,
            "metadata": d.metadata,
            "hash": d.content_hash,
            "spans": list(d.spans),
        }
        for d in out
    ]
    (folder / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "done").touch()
    return out


def build(
    data_dir: Path, embedder_name: str, docs: list[dict[str, Any]], parts: int, cache: Path | None
) -> tuple[Any, Any, int]:
    """Collections "one" (one commit) and "ten" (`parts` commits, no merge); returns them and the doc count."""
    from indexing.collection import CollectionSettings
    from indexing.store import CollectionStore
    from models import EmbedderCache, resolve_model_dir

    store = CollectionStore(data_dir)
    embedder_dir = str(resolve_model_dir(embedder_name))
    dim = EmbedderCache().get(embedder_name).dim
    one = store.create(CollectionSettings(name="one", embedder=embedder_dir, dim=dim))
    ten = store.create(CollectionSettings(name="ten", embedder=embedder_dir, dim=dim))
    stored = prepared(docs, embedder_name, one.settings.chunking, cache)
    with one.writer():
        one.docstore.upsert(stored)
        one.commit()
    with ten.writer():
        for chunk in np.array_split(np.arange(len(stored)), parts):
            ten.docstore.upsert([stored[i] for i in chunk])
            ten.commit()  # a commit writes one segment; no after_commit, so no merge
    return one, ten, len(stored)


def check_equal(one: Any, ten: Any, enc: PreEncoded, queries: list[str]) -> dict[str, Any]:
    """Top-10 of every mode: same ids and passage ids in the same order, scores within 1e-6."""
    from service.search import search_batch

    out: dict[str, Any] = {}
    for mode in MODES:
        a = search_batch(collection=one, embedder=enc, queries=queries, k=10, mode=mode)
        b = search_batch(collection=ten, embedder=enc, queries=queries, k=10, mode=mode)
        same_ids = sum(
            [(h.id, h.passage_id) for h in x.hits] == [(h.id, h.passage_id) for h in y.hits]
            for x, y in zip(a, b, strict=True)
        )
        diffs = [
            abs(h.score - g.score) for x, y in zip(a, b, strict=True) for h, g in zip(x.hits, y.hits, strict=False)
        ]
        out[mode] = {
            "queries": len(queries),
            "identical_ids": same_ids,
            "max_score_diff": float(max(diffs, default=0.0)),
            "equal": same_ids == len(queries) and max(diffs, default=0.0) <= 1e-6,
        }
    return out


def latency(
    one: Any, ten: Any, enc: Any, queries: list[str], rounds: int, modes: Sequence[Mode] = MODES
) -> dict[str, Any]:
    from service.search import search_batch

    out: dict[str, Any] = {}
    for mode in modes:
        times: dict[str, list[float]] = {"one": [], "ten": []}
        for coll in (one, ten):  # warm-up: views loaded, caches filled
            for q in queries[:20]:
                search_batch(collection=coll, embedder=enc, queries=[q], k=10, mode=mode)
        i = 0
        for _ in range(rounds):
            for q in queries:
                order = [("one", one), ("ten", ten)] if i % 2 == 0 else [("ten", ten), ("one", one)]
                i += 1
                for name, coll in order:
                    t0 = time.perf_counter()
                    search_batch(collection=coll, embedder=enc, queries=[q], k=10, mode=mode)
                    times[name].append(time.perf_counter() - t0)
        p50 = {n: float(np.percentile(t, 50)) * 1000 for n, t in times.items()}
        p95 = {n: float(np.percentile(t, 95)) * 1000 for n, t in times.items()}
        out[mode] = {
            "searches_per_collection": len(times["one"]),
            "one_p50_ms": round(p50["one"], 3),
            "ten_p50_ms": round(p50["ten"], 3),
            "one_p95_ms": round(p95["one"], 3),
            "ten_p95_ms": round(p95["ten"], 3),
            "ratio_p50_ten_over_one": round(p50["ten"] / p50["one"], 3),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beir", type=Path, default=BEIR, help="BEIR datasets folder (holds scifact/)")
    ap.add_argument("--embedder", default="default", help="'default' or an embedder directory")
    ap.add_argument("--limit", type=int, default=None, help="first N documents only (smoke tests)")
    ap.add_argument("--segments", type=int, default=10, help="commits of the many-segment collection")
    ap.add_argument("--rounds", type=int, default=5, help="passes over the test queries per mode")
    ap.add_argument("--cache", type=Path, default=CACHE / "segments", help="where embedded documents are kept")
    ap.add_argument("--no-cache", action="store_true", help="embed again and keep nothing")
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/segments.json")
    args = ap.parse_args(argv)
    import faiss

    from indexing.engine import LOCAL_FANOUT
    from models import EmbedderCache

    load0 = os.getloadavg()
    docs, queries = read_scifact(args.beir, args.limit)
    with tempfile.TemporaryDirectory(prefix="vela-segments-") as tmp:
        t0 = time.perf_counter()
        one, ten, n_docs = build(Path(tmp), args.embedder, docs, args.segments, None if args.no_cache else args.cache)
        build_s = time.perf_counter() - t0
        for coll in (one, ten):
            coll.refresh(LOCAL_FANOUT)  # what the background reader does after a publish
        segments = {"one": len(one.view().parts), "ten": len(ten.view().parts)}
        assert segments == {"one": 1, "ten": args.segments}, segments
        embedder = EmbedderCache().get(args.embedder)
        t0 = time.perf_counter()
        vecs = embedder.encode_queries(queries)  # (nq, d)
        encode_ms = (time.perf_counter() - t0) * 1000 / len(queries)
        single = []
        for q in queries[:50]:
            t0 = time.perf_counter()
            embedder.encode_queries([q])
            single.append(time.perf_counter() - t0)
        enc = PreEncoded({q: v for q, v in zip(queries, vecs, strict=True)})
        equal = check_equal(one, ten, enc, queries)
        lat = latency(one, ten, enc, queries, args.rounds)
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        lat_one_thread = latency(one, ten, enc, queries, args.rounds)
        faiss.omp_set_num_threads(threads)
        lat_encoded = latency(one, ten, embedder, queries, 1, ("dense", "hybrid"))
        stats = {"one": one.stats()["index"], "ten": ten.stats()["index"]}
    result = {
        "benchmark": "segments",
        "dataset": "scifact",
        "documents": n_docs,
        "passages": stats["one"]["passages"],
        "test_queries": len(queries),
        "embedder": args.embedder,
        "segments": segments,
        "dense_kind": {n: s["dense"]["kind"] for n, s in stats.items()},
        "build_s": round(build_s, 2),
        "equivalence_top10": equal,
        "all_equal": all(v["equal"] for v in equal.values()),
        "latency": {
            "what": "service.search.search_batch, one query per call, query vectors pre-encoded "
            "(engine + hydration, no encoder); collections alternated ABBA",
            "rounds": args.rounds,
            "faiss_threads": threads,
            **lat,
        },
        "latency_faiss_one_thread": {
            "what": "the same with faiss.omp_set_num_threads(1): FAISS's OpenMP threads on a shared 2-core "
            "machine make one flat search of the whole collection slow, which flatters 10 small segments",
            **lat_one_thread,
        },
        "latency_with_query_encoder": {
            "what": "search_batch with the real query encoder (one query per call, encoding included), 1 round",
            **lat_encoded,
        },
        "query_encoder_single_p50_ms": round(float(np.percentile(single, 50)) * 1000, 2),
        "query_encoder_batched_ms_per_query": round(encode_ms, 2),
        "target": "p50(ten) / p50(one) <= 1.15 per mode",
        "loadavg_start": [round(x, 2) for x in load0],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "machine": machine(),
        "command": command(),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
