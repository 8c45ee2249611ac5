"""Incremental commits: from `POST /index` to searchable, against the full rebuild every commit used to do.

1. Served: a collection of `--passages` real passages (bench.large_corpus, the corpus of `vela bench dense`)
   served by the real API in this process (uvicorn on loopback). Base vectors (`--vectors`): the MiniLM
   vectors bench.large_corpus caches under .vela-bench/ (encoding 100k passages takes 30-80 min on 2 shared
   cores the first time), or seeded random unit vectors of the same dim ("random": the texts, BM25, the
   HNSW build and every new document's embedding are real; only the base passages' vectors are not).
   Dense settings: kind "auto" with hnsw_threshold 20,000, so the base segment is HNSW and each
   new 50-document segment (and every merge of them, while under 20,000 rows) is flat. Then `--commits`
   jobs of `--batch` new documents (the passages after the first `--passages` of bench.large_corpus),
   one after another: POST /index, poll GET /jobs/{id} until it succeeded, then POST /search (BM25) for the
   marker word every document of that job has in its title until one of them comes back. That time, from
   the POST to the search that finds it, is the figure (p50, p95, max; target p95 <= 2 s). Merges run in
   the background as they do in the service; the segment count is read after each commit. Every 10th
   job's texts are also timed through the bare encoder, to show how much of a commit is embedding.
2. The old behaviour, in the same run: `Collection.commit(rebuild=True)` on the same collection (server
   stopped, merges idle) rebuilds every segment from the doc store into one (HNSW over all passages), as
   every commit did before segments. Timed `--rebuilds` times; ratio rebuild / incremental p50 and p95
   (target >= 20x).
3. Flat, 1M synthetic passages with a tiny encoder: one commit of 50 documents through run_job
   (bench/incremental_flat.py; target <= 2 s).

    vela bench incremental --out bench/results/incremental.json [--vectors random]
    (--passages 0 runs part 3 only, --flat-passages 0 parts 1-2 only)
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import command, free_port, machine, write_result

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".vela-bench"
NAME = "large"
HNSW_THRESHOLD = 20_000
BASE_VECTORS = {
    "cached": "MiniLM vectors of bench.large_corpus (encoded once, cached under .vela-bench/)",
    "embed": "chunked and embedded by the collection's embedder before the run",
    "random": "seeded random unit vectors of the embedder's dim; texts real, new documents embedded by the server",
}


@contextmanager
def serve(data_dir: Path, embedder: str) -> Iterator[httpx.Client]:
    """The real app under uvicorn on a loopback port, in this process (as tests/service/conftest.py does)."""
    import uvicorn

    from service.main import create_app
    from service.server import uvicorn_config
    from service.settings import Settings

    settings = Settings(data_dir=data_dir, embedder=embedder)
    port = free_port()
    server = uvicorn.Server(uvicorn_config(create_app(settings), settings, host="127.0.0.1", port=port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 600
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
        while True:
            try:
                if server.started and client.get("/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or not thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.1)
        try:
            yield client
        finally:
            server.should_exit = True
            thread.join(60)


def build_base(data_dir: Path, rows: list[dict[str, str]], embedder: str, vectors: str) -> None:
    """The base collection of `rows`, one document per passage. vectors "cached": the MiniLM vectors
    bench.large_corpus caches (default embedder only); "embed": chunked and embedded here (small sizes);
    "random": seeded random unit vectors (real texts, so BM25 and commits are real; see --vectors)."""
    from indexing.dense import DenseIndexParams

    dense = DenseIndexParams(kind="auto", hnsw_threshold=HNSW_THRESHOLD)
    if vectors == "cached":
        from bench.large_corpus import build_collection

        build_collection(data_dir, passages=len(rows), name=NAME, dense=dense)
        return
    from indexing.collection import CollectionSettings
    from indexing.docstore import StoredDocument
    from indexing.prepare import chunk_and_embed, content_hash
    from indexing.store import CollectionStore
    from models import EmbedderCache, resolve_model_dir

    model = EmbedderCache().get(embedder)
    store = CollectionStore(data_dir)
    settings = CollectionSettings(
        name=NAME, embedder=str(resolve_model_dir(embedder)), dim=model.dim, dense_index=dense
    )
    coll = store.create(settings)
    rng = np.random.default_rng(0)
    with coll.writer():
        for start in range(0, len(rows), 4096):
            docs = [{"id": p["id"], "title": "", "text": p["text"]} for p in rows[start : start + 4096]]
            if vectors == "embed":
                coll.docstore.upsert(chunk_and_embed(docs, chunking=settings.chunking, embedder=model))
                continue
            vecs = rng.standard_normal((len(docs), model.dim), dtype=np.float32)  # (n, d)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            coll.docstore.upsert(
                StoredDocument(
                    d["id"], "", d["text"], {}, content_hash(d, settings.chunking), [(0, len(d["text"]))], v[None]
                )
                for d, v in zip(docs, vecs, strict=True)
            )
        coll.commit()
    coll.close()


def commit_loop(
    client: httpx.Client, new: list[dict[str, str]], commits: int, batch: int, embedder: str
) -> dict[str, Any]:
    """`commits` jobs of `batch` documents; per job the seconds from POST /index to a search that finds it.
    Every 10th job's texts also go through the bare encoder afterwards (how much of a commit is encoding)."""
    from models import EmbedderCache

    encoder = EmbedderCache().get(embedder)
    total, to_job, segments, encode = [], [], [], []
    for c in range(commits):
        marker = f"incmark{c:04d}"
        docs = [
            {"id": f"inc-{c}-{j}", "title": marker, "text": p["text"]}
            for j, p in enumerate(new[c * batch : (c + 1) * batch])
        ]
        ids = {d["id"] for d in docs}
        t0 = time.perf_counter()
        r = client.post("/index", json={"collection": NAME, "documents": docs})
        r.raise_for_status()
        job_id = r.json()["job_id"]
        while (status := client.get(f"/jobs/{job_id}").json()["status"]) not in ("succeeded", "failed", "cancelled"):
            time.sleep(0.01)
        assert status == "succeeded", client.get(f"/jobs/{job_id}").json()
        t_job = time.perf_counter()
        body = {"collection": NAME, "query": marker, "mode": "bm25", "k": 10}
        while not ids & {h["id"] for h in client.post("/search", json=body).json()["hits"]}:
            if time.perf_counter() - t0 > 120:
                raise TimeoutError(f"commit {c}: documents not searchable after 120 s")
            time.sleep(0.01)
        total.append(time.perf_counter() - t0)
        to_job.append(t_job - t0)
        segments.append(int(client.get(f"/collections/{NAME}").json()["index"]["segments"]))
        if c % 10 == 0:
            t0 = time.perf_counter()
            encoder.encode_documents([f"{d['title']}\n{d['text']}" for d in docs])
            encode.append(time.perf_counter() - t0)
        if c % 20 == 19:
            print(f"commit {c + 1}: p50 so far {np.median(total) * 1000:.0f} ms, {segments[-1]} segments", flush=True)
    ms = np.asarray(total) * 1000
    return {
        "commits": commits,
        "documents_per_commit": batch,
        "post_to_searchable_ms": {
            "p50": round(float(np.percentile(ms, 50)), 1),
            "p95": round(float(np.percentile(ms, 95)), 1),
            "max": round(float(ms.max()), 1),
            "mean": round(float(ms.mean()), 1),
        },
        "post_to_job_succeeded_ms_p50": round(float(np.percentile(to_job, 50)) * 1000, 1),
        "bare_encoder_same_texts_ms_p50": round(float(np.percentile(encode, 50)) * 1000, 1),
        "each_ms": [round(float(x), 1) for x in ms],
        "segments_after_each_commit": segments,
        "segments_max": max(segments),
    }


def rebuilds(data_dir: Path, times: int) -> dict[str, Any]:
    """Today's old commit: every segment rebuilt from the doc store into one, `times` times."""
    from indexing.merger import wait_background
    from indexing.store import CollectionStore

    wait_background(600)
    coll = CollectionStore(data_dir).get(NAME)
    before = coll.stats()["index"]
    out = []
    for _ in range(times):
        with coll.writer():
            t0 = time.perf_counter()
            coll.commit(rebuild=True)
            out.append(time.perf_counter() - t0)
    after = coll.stats()["index"]
    coll.close()
    return {
        "rebuild_s": [round(t, 2) for t in out],
        "passages": after["passages"],
        "segments_before": before["segments"],
        "segments_after": after["segments"],
        "dense_kind_after": after["dense"]["kind"],
    }


def run_served(args: argparse.Namespace, embedder: str) -> dict[str, Any]:
    """Parts 1 and 2: the served commits, then the full rebuilds on the same collection."""
    from bench.large_corpus import all_passages

    vectors = args.vectors or ("cached" if embedder == "default" else "embed")
    if vectors == "cached":
        if embedder != "default":
            raise SystemExit("--vectors cached holds MiniLM vectors: it needs --embedder default")
        from bench.large_corpus import load_passages

        load_passages(args.passages)  # encodes (once, cached) before anything is timed
    rows = all_passages()
    new = rows[args.passages : args.passages + args.commits * args.batch]
    if len(new) < args.commits * args.batch:
        raise SystemExit(f"the corpora have {args.passages + len(new)} passages, fewer than needed")
    root = Path(tempfile.mkdtemp(prefix="vela-incremental-", dir=args.workdir))
    try:
        t0 = time.perf_counter()
        build_base(root / "data", rows[: args.passages], embedder, vectors)
        base_build_s = time.perf_counter() - t0
        with serve(root / "data", embedder) as client:
            base = client.get(f"/collections/{NAME}").json()["index"]
            served = commit_loop(client, new, args.commits, args.batch, embedder)
            load_mid = os.getloadavg()
        old = rebuilds(root / "data", args.rebuilds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lat = served["post_to_searchable_ms"]
    best = min(old["rebuild_s"]) * 1000
    return {
        "served": {
            "passages": args.passages,
            "embedder": args.embedder,
            "base_vectors": BASE_VECTORS[vectors],
            "dense_index": {"kind": "auto", "hnsw_threshold": HNSW_THRESHOLD},
            "base_segment_kind": base["dense"]["kind"],
            "base_build_s": round(base_build_s, 1),
            **served,
            "loadavg_after_commits": load_mid,
            "target": "p95 <= 2000 ms",
        },
        "full_rebuild": {**old, "what": "Collection.commit(rebuild=True): every commit before segments"},
        "ratio_rebuild_over_incremental": {
            "vs_p50": round(best / lat["p50"], 1),
            "vs_p95": round(best / lat["p95"], 1),
            "rebuild": "fastest of the timed rebuilds",
            "target": ">= 20",
        },
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--passages", type=int, default=100_000, help="base collection (bench.large_corpus); 0: skip parts 1-2"
    )
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--batch", type=int, default=50, help="documents per commit")
    ap.add_argument("--rebuilds", type=int, default=2, help="timed full rebuilds (the old commit)")
    ap.add_argument("--embedder", default="default", help="'default' (cached MiniLM vectors) or a model directory")
    ap.add_argument(
        "--vectors",
        choices=sorted(BASE_VECTORS),
        default=None,
        help="base vectors (default: cached for the default embedder, else embed): "
        + "; ".join(f"{k}: {v}" for k, v in BASE_VECTORS.items()),
    )
    ap.add_argument("--flat-passages", type=int, default=1_000_000, help="flat synthetic collection; 0: skip")
    ap.add_argument("--flat-commits", type=int, default=3, help="timed 50-document commits into it")
    ap.add_argument("--flat-embedder", type=Path, default=None, help="its encoder (default: a tiny random BERT)")
    ap.add_argument("--workdir", type=Path, default=None, help="where the data directory goes (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/incremental.json")
    args = ap.parse_args(argv)

    load0 = os.getloadavg()
    embedder = args.embedder if args.embedder == "default" else str(Path(args.embedder).resolve())
    result: dict[str, Any] = {"benchmark": "incremental"}
    if args.passages:
        result.update(run_served(args, embedder))
    if args.flat_passages:
        from bench.incremental_flat import run_flat

        result["flat"] = run_flat(args.flat_passages, args.batch, args.flat_commits, args.flat_embedder)
    result.update(
        loadavg={"start": load0, "end": os.getloadavg()},
        machine=machine(),
        command=command(),
    )
    write_result(args.out, result)


if __name__ == "__main__":
    main()
