"""Reindex SciFact to a second registered embedder while it serves: searches and writes run throughout.

`vela serve` (embedded queue) on a fresh data directory holds SciFact (5,183 documents) embedded with `default`.
`vela export-onnx default` makes a second embedder (MiniLM, every layer int8), registered as `minilm-int8`. Then:
1. idle: closed-loop hybrid searches at concurrency C for a while (the baseline p99);
2. POST /collections/scifact/reindex {"embedder": "minilm-int8"} (promoted when built), while the same searches
   run and a writer adds 500 new documents in batches of 10; every search is checked (2xx, at least one hit);
3. once the writes are done and before the promotion, the results of Q queries are recorded; after the promotion:
   all 500 documents in the promoted generation, its vectors the new embedder's (the reindex's first step encoded
   again, bit for bit), and POST rollback brings back the recorded results exactly;
4. with --gate: a gated reindex to a randomly initialised tiny model, judged on SciFact's test qrels registered as
   a dataset, must be refused with both NDCG@10 figures.

    vela bench reindex [--concurrency 4] [--idle-seconds 20] [--writes 500] [--gate]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    command,
    free_port,
    machine,
    percentiles,
    start_vela,
    wait_jobs,
    wait_ready,
    write_result,
)
from bench.latency import cpu_ticks
from bench.reindex_checks import checks, first_step, gate, generations_on_disk, results

BEIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir" / "scifact"


class Load:
    """Closed-loop search clients: each records (start time, latency), and every error or empty result."""

    def __init__(self, base: str, queries: list[str], concurrency: int) -> None:
        self.base, self.queries, self.concurrency = base, queries, concurrency
        self.samples: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.empty = 0
        self._stop = threading.Event()
        self.running = threading.Event()  # cleared: the clients pause (results recorded alone, see main)
        self.running.set()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._loop, args=(i,)) for i in range(concurrency)]

    def _loop(self, worker: int) -> None:
        i = worker
        with httpx.Client(base_url=self.base, timeout=60) as client:
            while not self._stop.is_set():
                if not self.running.wait(0.1):
                    continue
                body = {"collection": "scifact", "query": self.queries[i % len(self.queries)], "mode": "hybrid"}
                i += self.concurrency
                t0 = time.time()
                try:
                    r = client.post("/search", json=body)
                    ok, hits = r.status_code == 200, r.json().get("hits") if r.status_code == 200 else None
                except httpx.HTTPError as exc:
                    ok, hits, r = False, None, None
                    self.errors.append(repr(exc))
                with self._lock:
                    self.samples.append((t0, time.time() - t0))
                    if r is not None and not ok:
                        self.errors.append(f"{r.status_code} {r.text[:200]}")
                    elif ok and not hits:
                        self.empty += 1

    def start(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def between(self, start: float, end: float) -> list[float]:
        return [lat for t0, lat in self.samples if start <= t0 and t0 + lat <= end]


def fusion_chosen(client: httpx.Client, limit_s: float = 900.0) -> float:
    """Wait for the fusion the collection chooses without labels after its ingest (a background job): chosen in the
    middle of the run, it would change the old generation's hybrid results between the two recordings."""
    t0 = time.time()
    while time.time() - t0 < limit_s and not client.get("/collections/scifact").json()["fusion"].get("chosen"):
        time.sleep(1.0)
    return round(time.time() - t0, 1)


def settle(client: httpx.Client, quiet_s: float = 10.0, limit_s: float = 300.0) -> float:
    """Wait until the serving index publishes nothing new for `quiet_s` (merges after the writes change segment
    layout, and with it the last bits of float scores, which a bit-for-bit comparison would see)."""
    t0 = time.time()
    last, since = None, time.time()
    while time.time() - t0 < limit_s:
        index = client.get("/collections/scifact").json()["index"]
        now = (index["version"], index["segments"], json.dumps(client.get("/collections/scifact").json()["fusion"]))
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet_s:
            break
        time.sleep(0.5)
    return round(time.time() - t0, 1)


def wait_job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    return wait_jobs(client, [job_id])[0]


def cpu_seconds(pid: int) -> float:
    """CPU time of `vela serve` and every process under it: with several API processes the work is in those."""
    return cpu_ticks(pid) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--idle-seconds", type=float, default=20)
    ap.add_argument("--writes", type=int, default=500, help="new documents written during the reindex")
    ap.add_argument("--compare-queries", type=int, default=100, help="queries whose results rollback must restore")
    ap.add_argument("--max-docs", type=int, default=None, help="only the first N SciFact documents (a smoke run)")
    ap.add_argument("--gate", action="store_true", help="also: a gated reindex to a random tiny model is refused")
    ap.add_argument("--out", type=Path, default=Path("bench/results/reindex.json"))
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from models.onnx_export import export
    from models.registry import ModelRegistry

    corpus = [json.loads(line) for line in (BEIR / "corpus.jsonl").read_text().splitlines()]
    docs = [{"id": d["_id"], "title": d["title"], "text": d["text"]} for d in corpus[: args.max_docs]]
    queries = [json.loads(line)["text"] for line in (BEIR / "queries.jsonl").read_text().splitlines()]
    work = Path(tempfile.mkdtemp(prefix="vela-bench-reindex-"))
    data = work / "data"
    registry = ModelRegistry(data / "models")
    registry.register("minilm-int8", export("default", str(work / "minilm-int8"), quantize=True))
    port = free_port()
    env = {"VELA_DATA_DIR": str(data), "VELA_LOG_LEVEL": "WARNING", "VELA_EMBEDDER": "default"}
    api = start_vela(["serve", "--port", str(port)], env)
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {"command": command(), "machine": machine(), "loadavg_start": os.getloadavg()}
    try:
        wait_ready(base)
        client = httpx.Client(base_url=base, timeout=300)
        t = time.time()
        ingest = [client.post("/index", json={"collection": "scifact", "documents": docs}).json()["job_id"]]
        assert all(j["status"] == "succeeded" for j in wait_jobs(client, ingest))
        out["ingest_s"] = round(time.time() - t, 1)
        out["documents"] = client.get("/collections/scifact").json()["documents"]
        out["fusion_chosen_after_s"] = fusion_chosen(client)  # in the background after the ingest: not mid-run
        out["fusion_before"] = client.get("/collections/scifact").json()["fusion"].get("method")

        load = Load(base, queries, args.concurrency).start()
        idle_start = time.time()
        time.sleep(args.idle_seconds)
        idle_end = time.time()
        first_page = first_step(data)
        cpu0, t_cpu0 = cpu_seconds(api.pid), time.time()
        r = client.post("/collections/scifact/reindex", json={"embedder": "minilm-int8"})
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        reindex_start = time.time()
        new_ids = [f"bench-new-{i}" for i in range(args.writes)]
        write_jobs: list[tuple[float, dict[str, Any]]] = []
        for i in range(0, len(new_ids), 10):
            batch = [
                {"id": d, "title": "New note", "text": f"{corpus[j % len(corpus)]['text'][:400]} ({d})"}
                for j, d in enumerate(new_ids[i : i + 10], start=i)
            ]
            j = client.post("/index", json={"collection": "scifact", "documents": batch}).json()["job_id"]
            write_jobs.append((time.time(), wait_job(client, j)))
        writes_done = time.time()
        running = client.get(f"/jobs/{job_id}").json()
        compare = queries[: args.compare_queries]
        settled = settle(client)  # the background merges of the write commits are over: the old index is final
        # The serving (old) generation, with every write, before the switch. The load pauses meanwhile: the
        # default encoder's int8 query vectors depend on which queries share a micro-batch, so each query is
        # encoded alone here and after the rollback, and the two lists can be compared bit for bit.
        load.running.clear()
        time.sleep(1.0)
        before = results(client, compare)
        after_check = client.get(f"/jobs/{job_id}").json()
        load.running.set()
        job = wait_job(client, job_id)
        promoted_at = job["finished_at"]
        cpu1, t_cpu1 = cpu_seconds(api.pid), time.time()
        time.sleep(3)
        load.stop()
        out["reindex_job"] = {k: job[k] for k in ("status", "done", "total", "attempts", "result", "error")}
        out["reindex_s"] = round(job["finished_at"] - job["started_at"], 1)
        out["server_cpu_cores_during_reindex"] = round((cpu1 - cpu0) / (t_cpu1 - t_cpu0), 2)
        out["loadavg_after_reindex"] = os.getloadavg()
        out["writes"] = {
            "documents": len(new_ids),
            "jobs_succeeded": sum(j["status"] == "succeeded" for _, j in write_jobs),
            "jobs_finished_before_promotion": sum(j["finished_at"] < promoted_at for _, j in write_jobs),
            "writer_s": round(writes_done - reindex_start, 1),
            "reindex_progress_when_writes_done": f"{running['done']}/{running['total']} ({running['status']})",
        }
        out["results_recorded_while_old_generation_served"] = after_check["status"] == "running"
        out["old_index_settled_s"] = settled
        idle = percentiles(load.between(idle_start, idle_end))
        during = percentiles(load.between(reindex_start, promoted_at))
        out["search"] = {
            "mode": "hybrid",
            "concurrency": args.concurrency,
            "idle": idle,
            "during_reindex": during,
            "p99_ratio": round(during["p99_ms"] / idle["p99_ms"], 2),
            "requests_total": len(load.samples),
            "errors": len(load.errors),
            "empty_results": load.empty,
            "error_samples": load.errors[:5],
        }
        out["checks"] = checks(client, data, new_ids, compare, before, first_page)
        if args.gate:
            out["gate"] = gate(client, data, work)
        out["generations_on_disk"] = generations_on_disk(data)
        out["loadavg_end"] = os.getloadavg()
    finally:
        api.terminate()
        api.wait(60)
        write_result(args.out, out)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
