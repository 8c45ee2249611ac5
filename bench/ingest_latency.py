"""Search latency while a large ingest runs, against the same searches on an idle service.

A real deployment in miniature: redis-server, `vela serve` (Redis mode) and one `vela worker`, all on
loopback. Closed-loop hybrid searches at a fixed concurrency run first on the idle service, then while the
worker ingests N short documents into another collection. Prints and writes JSON with both latency
profiles and their p99 ratio.

    python -m bench.ingest_latency --docs 20000 --concurrency 4 --out bench/results/ingest-latency.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import (
    closed_loop,
    command,
    free_port,
    machine,
    percentiles,
    start_redis,
    start_vela,
    wait_jobs,
    wait_ready,
    write_result,
)

BEIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir" / "scifact"


def scifact(n_search_docs: int) -> tuple[list[dict[str, str]], list[str], list[str]]:
    corpus = [json.loads(line) for line in (BEIR / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line)["text"] for line in (BEIR / "queries.jsonl").read_text().splitlines()]
    docs = [{"id": d["_id"], "title": d["title"], "text": d["text"]} for d in corpus[:n_search_docs]]
    sentences = [s for d in corpus for s in re.split(r"(?<=\.)\s+", d["text"]) if len(s.split()) >= 5]
    return docs, queries, sentences


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20_000, help="short documents ingested under load")
    ap.add_argument("--search-docs", type=int, default=1000, help="SciFact documents of the searched collection")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--idle-seconds", type=float, default=30)
    ap.add_argument("--load-seconds", type=float, default=150, help="searches measured while the ingest runs")
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--out", type=Path, default=Path("bench/results/ingest-latency.json"))
    args = ap.parse_args(argv)
    # SIGTERM (a CI timeout, a Ctrl-C from a wrapper) still stops the servers this script started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    docs, queries, sentences = scifact(args.search_docs)
    short = [{"id": f"s{i}", "text": sentences[i % len(sentences)] + f" (copy {i})"} for i in range(args.docs)]
    work = Path(tempfile.mkdtemp(prefix="vela-bench-"))
    redis_proc, redis_url = start_redis(work)
    port = free_port()
    env = {"VELA_REDIS_URL": redis_url, "VELA_DATA_DIR": str(work / "data"), "VELA_LOG_LEVEL": "WARNING"}
    api = start_vela(["serve", "--port", str(port)], env)
    worker = start_vela(["worker", "--name", "bench-worker"], env)
    base = f"http://127.0.0.1:{port}"
    procs = [worker, api, redis_proc]
    try:
        wait_ready(base)
        client = httpx.Client(base_url=base, timeout=120)
        job = client.post("/index", json={"collection": "search", "documents": docs}).json()["job_id"]
        wait_jobs(client, [job])

        def body(i: int) -> dict[str, object]:
            return {"collection": "search", "query": queries[i % len(queries)], "mode": args.mode, "k": 10}

        idle_end = time.time() + args.idle_seconds
        idle_lat, idle_s = asyncio.run(
            closed_loop(base, body, concurrency=args.concurrency, until=lambda: time.time() > idle_end)
        )

        t0 = time.time()
        batch = 10_000
        job_ids = [
            client.post("/index", json={"collection": "load", "documents": short[i : i + batch]}).json()["job_id"]
            for i in range(0, len(short), batch)
        ]

        def ingest_done() -> bool:
            states = [client.get(f"/jobs/{j}").json()["status"] for j in job_ids]
            return all(s in ("succeeded", "failed", "cancelled") for s in states)

        def load_version() -> int:
            r = client.get("/collections/load")
            return int(r.json()["index"]["version"]) if r.status_code == 200 else 0

        version_before = load_version()
        load_end = time.time() + args.load_seconds
        load_lat, load_s = asyncio.run(
            closed_loop(base, body, concurrency=args.concurrency, until=lambda: time.time() > load_end)
        )
        # The whole window must have been under ingest, or the comparison says nothing.
        done_under_load = sum(client.get(f"/jobs/{j}").json()["done"] for j in job_ids)
        snapshots_under_load = load_version() - version_before  # each one loaded by the API mid-window
        still_running = not ingest_done()
        jobs = wait_jobs(client, job_ids)
        ingest_s = time.time() - t0
        assert all(j["status"] == "succeeded" for j in jobs), jobs
        info = client.get("/collections/load").json()
        idle, load = percentiles(idle_lat), percentiles(load_lat)
        idle["qps"] = round(len(idle_lat) / idle_s, 1)
        load["qps"] = round(len(load_lat) / load_s, 1)
        write_result(
            args.out,
            {
                "mode": args.mode,
                "concurrency": args.concurrency,
                "search_collection_docs": len(docs),
                "ingest_docs": info["documents"],
                "ingest_seconds": round(ingest_s, 1),
                "ingest_docs_per_s": round(info["documents"] / ingest_s, 1),
                "load_seconds": args.load_seconds,
                "ingest_running_throughout": still_running,
                "docs_ingested_during_load": done_under_load,
                "snapshots_published_during_load": snapshots_under_load,
                "idle": idle,
                "during_ingest": load,
                "p99_ratio": round(load["p99_ms"] / idle["p99_ms"], 2),
                "machine": machine(),
                "command": command(),
            },
        )
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)


if __name__ == "__main__":
    main()
