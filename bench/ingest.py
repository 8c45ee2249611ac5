"""End-to-end ingest throughput against the bare encoder on the same texts.

The same N short documents (SciFact sentences: one passage each) go through
1. the bare encoder in this process: `encode_documents` on the passage texts, nothing else;
2. the product: `POST /index` to a real `vela serve` (embedded default: the in-process worker chunks,
   embeds, stores and publishes the indexes), timed from the request to the job's success.
The ratio is (2) / (1). The server's peak RSS growth over the ingest, per 100k passages, comes along.

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
        rss_before = _kb(proc.pid, "VmRSS")
        with httpx.Client(base_url=base, timeout=300) as client:
            t0 = time.perf_counter()
            r = client.post("/index", json={"collection": "ingest", "documents": docs})
            r.raise_for_status()
            (job,) = wait_jobs(client, [r.json()["job_id"]], timeout=7200)
            seconds = time.perf_counter() - t0
            assert job["status"] == "succeeded", job
            info = client.get("/collections/ingest").json()
        peak_growth_mb = (_kb(proc.pid, "VmHWM") - rss_before) / 1024
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
        "rss_mb_per_100k": round(peak_growth_mb / info["passages"] * 100_000, 1),
        "embedder": os.environ.get("VELA_EMBEDDER", "default"),
        "machine": machine(),
        "command": command(),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
