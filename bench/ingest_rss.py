"""Memory of a large ingest: peak RSS of one indexing process for N short documents, for several N.

Each size runs in a fresh process through the worker's own code path (`run_job`: chunk, embed, store,
publish snapshots) in jobs of 10,000 documents, as the API would queue them. The encoder is a random
BERT with MiniLM's tokenizer and width (384-d, one layer): the index is as large as MiniLM's and the
pipeline the same, while the run takes minutes instead of an hour on 2 CPU cores.

    python -m bench.ingest_rss --sizes 20000,200000 --out bench/results/ingest-rss.json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import command, machine, random_bert_encoder, write_result

JOB_DOCS = 10_000


def make_encoder(root: Path) -> Path:
    return random_bert_encoder(root, hidden=384, heads=6, intermediate=512, max_positions=512, max_length=128)


def one_size(n: int, encoder: str) -> dict[str, float]:
    """Runs in its own process: ingest n documents, report peak RSS."""
    from indexing.bm25 import BM25Params
    from indexing.chunking import ChunkingParams
    from indexing.collection import CollectionSettings
    from indexing.ingest import run_job
    from indexing.jobs import JobKind, JobStore
    from indexing.store import CollectionStore
    from models import EmbedderCache

    data = Path(tempfile.mkdtemp(prefix="vela-rss-"))
    embedders = EmbedderCache()
    store = CollectionStore(data)
    coll = store.create(
        CollectionSettings(name="rss", embedder=encoder, dim=384, chunking=ChunkingParams(), bm25=BM25Params())
    )
    jobs = JobStore(data / "jobs.sqlite3")
    embedders.get(encoder)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.time()
    for start in range(0, n, JOB_DOCS):
        docs = [
            {"id": f"d{i}", "text": f"short document number {i} about subject {i % 997} and item {i % 31}"}
            for i in range(start, min(n, start + JOB_DOCS))
        ]
        job = jobs.create(collection="rss", kind=JobKind.UPSERT, payload=docs)
        run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders, batch_size=256)
    stats = coll.stats()
    return {
        "docs": stats["documents"],
        "passages": stats["passages"],
        "seconds": round(time.time() - t0, 1),
        "rss_after_model_load_mb": round(base_rss, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "index_mb": round(stats["index"]["bytes"] / 2**20, 1),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20000,200000")
    ap.add_argument("--out", type=Path, default=Path("bench/results/ingest-rss.json"))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--encoder", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one_size(args.one, args.encoder)))
        return
    encoder = make_encoder(Path(tempfile.mkdtemp(prefix="vela-enc-")))
    runs = []
    for n in (int(x) for x in args.sizes.split(",")):
        out = subprocess.run(
            [sys.executable, "-m", "bench.ingest_rss", "--one", str(n), "--encoder", str(encoder)],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    for r in runs:
        r["working_mb"] = round(r["peak_rss_mb"] - r["rss_after_model_load_mb"], 1)
        r["working_mb_per_100k_docs"] = round(r["working_mb"] / r["docs"] * 100_000, 1)
        # What the ingest needs beside the index it builds: flat if batches are bounded.
        r["working_minus_index_mb"] = round(r["working_mb"] - r["index_mb"], 1)
    write_result(args.out, {"runs": runs, "job_docs": JOB_DOCS, "machine": machine(), "command": command()})


if __name__ == "__main__":
    main()
