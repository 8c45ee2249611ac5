"""End-to-end ingest throughput against the bare encoder on the same texts.

The same N short documents (SciFact sentences: one passage each) go through
1. the bare encoder in this process: `encode_documents` on the passage texts, nothing else;
2. the product: `POST /index` to a real `vela serve` (embedded default: the in-process worker chunks,
   embeds, stores and publishes the indexes), timed from the request to the job's success.
The ratio is (2) / (1). The growth of the server's peak RSS per 100k passages (from two half-size jobs) comes along.

    vela bench ingest --docs 5000 --out bench/results/ingest.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import command, free_port, machine, start_vela, wait_jobs, wait_ready, write_result

BEIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir"


def short_documents(n: int) -> list[dict[str, str]]:
    corpus = [json.loads(line) for line in (BEIR / "scifact/corpus.jsonl").read_text().splitlines()]
    sentences = [s for d in corpus for s in re.split(r"(?<=\.)\s+", d["text"]) if len(s.split()) >= 5]
    return [{"id": f"s{i}", "text": sentences[i % len(sentences)]} for i in range(n)]


def _kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def rss_per_100k(small_run_slope_mb: float) -> dict[str, Any]:
    """Per 100k passages, from the 20k-vs-200k ingest-rss run when it exists: a few thousand documents are
    too few to see the slope through allocator noise (the small run's own slope is kept beside it)."""
    here = {"rss_mb_per_100k_this_run": round(small_run_slope_mb * 100_000, 1)}
    path = Path(__file__).resolve().parent / "results" / "ingest-rss.json"
    if not path.exists():
        return {"rss_mb_per_100k": here["rss_mb_per_100k_this_run"], **here}
    small, large = sorted(json.loads(path.read_text())["runs"], key=lambda r: r["docs"])[:2]
    slope = (large["peak_rss_mb"] - small["peak_rss_mb"]) / (large["passages"] - small["passages"])
    return {"rss_mb_per_100k": round(slope * 100_000, 1), "rss_source": "bench/results/ingest-rss.json", **here}


def bare_encoder_docs_per_s(texts: list[str]) -> float:
    from models import EmbedderCache

    embedder = EmbedderCache().get(os.environ.get("VELA_EMBEDDER", "default"))
    embedder.encode_documents(texts[:64])  # warm up
    t0 = time.perf_counter()
    embedder.encode_documents(texts)
    return len(texts) / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--out", type=Path, default=Path("bench/results/ingest.json"))
    args = ap.parse_args(argv)
    docs = short_documents(args.docs)
    encoder_rate = bare_encoder_docs_per_s([d["text"] for d in docs])

    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="vela-bench-ingest-"))
    proc = start_vela(["serve", "--port", str(port)], {"VELA_DATA_DIR": str(data), "VELA_LOG_LEVEL": "WARNING"})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base)
        # Two jobs of half the documents each: the peak RSS after each gives the slope per passage, free
        # of the one-off costs (first forward pass, allocator arenas) that a single small run would scale up.
        half = len(docs) // 2
        peaks, passages_after = [], []
        with httpx.Client(base_url=base, timeout=300) as client:
            t0 = time.perf_counter()
            for part in (docs[:half], docs[half:]):
                r = client.post("/index", json={"collection": "ingest", "documents": part})
                r.raise_for_status()
                (job,) = wait_jobs(client, [r.json()["job_id"]], timeout=7200)
                assert job["status"] == "succeeded", job
                peaks.append(_kb(proc.pid, "VmHWM") / 1024)
                passages_after.append(client.get("/collections/ingest").json()["passages"])
            seconds = time.perf_counter() - t0
            info = client.get("/collections/ingest").json()
        slope_mb = (peaks[1] - peaks[0]) / max(passages_after[1] - passages_after[0], 1)
    finally:
        proc.terminate()
        proc.wait(60)
    rate = info["documents"] / seconds
    result: dict[str, Any] = {
        "docs": info["documents"],
        "passages": info["passages"],
        "seconds": round(seconds, 1),
        "docs_per_s": round(rate, 1),
        "encoder_docs_per_s": round(encoder_rate, 1),
        "ratio": round(rate / encoder_rate, 3),
        **rss_per_100k(slope_mb),
        "peak_rss_mb": [round(x, 1) for x in peaks],
        "embedder": os.environ.get("VELA_EMBEDDER", "default"),
        "machine": machine(),
        "command": command(),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
