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
import numpy as np

from bench.common import (
    command,
    free_port,
    machine,
    percentiles,
    random_bert_encoder,
    start_vela,
    wait_jobs,
    wait_ready,
    write_result,
)

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


def results(client: httpx.Client, queries: list[str]) -> list[list[tuple[str, float]]]:
    out = []
    for q in queries:
        r = client.post("/search", json={"collection": "scifact", "query": q, "mode": "hybrid", "k": 10})
        r.raise_for_status()
        out.append([(h["id"], h["score"]) for h in r.json()["hits"]])
    return out


def wait_job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    return wait_jobs(client, [job_id])[0]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def first_step(data: Path) -> list[str]:
    """The documents the reindex embeds in its first step, in its order (indexing.gen_sync.pending's), read before
    it starts: the writes that follow sort after them and cannot change it."""
    from indexing import generations as gens
    from indexing.gen_sync import PAGE, stored_hashes

    return list(stored_hashes(gens.open_generation(data / "collections" / "scifact", 0)))[:PAGE]


def checks(
    client: httpx.Client,
    data: Path,
    new_ids: list[str],
    compare: list[str],
    before: list[list[tuple[str, float]]],
    page: list[str],
) -> dict[str, Any]:
    from indexing import generations as gens
    from indexing.gen_sync import stored_hashes
    from indexing.prepare import prepare_documents
    from models import EmbedderCache

    root = data / "collections" / "scifact"
    info = client.get("/collections/scifact").json()
    pointer = gens.read_pointer(root)
    new, old = gens.open_generation(root, pointer.current), gens.open_generation(root, pointer.previous or 0)
    held = stored_hashes(new)
    served = sum(client.get(f"/collections/scifact/documents/{d}").status_code == 200 for d in new_ids)
    # The reindex's first step, encoded again with the registered embedder: the same input in the same order, so
    # the vectors must be the promoted generation's bit for bit (the int8 encoder's output depends on the batch).
    embedder = EmbedderCache().get(new.settings.embedder)
    records = old.documents(page).values()
    docs = [{"id": r.doc_id, "title": r.title, "text": r.text, "metadata": r.metadata} for r in records]
    again = prepare_documents(docs, new, embedder)
    vec_new = np.concatenate([_vectors(new, d.doc_id) for d in again])
    vec_old = np.concatenate([_vectors(old, d.doc_id) for d in again])
    vec_again = np.concatenate([d.embeddings for d in again])
    old_model = EmbedderCache().get(old.settings.embedder)
    vec_old_again = np.concatenate([d.embeddings for d in prepare_documents(docs, old, old_model)])
    cos = (vec_new * vec_old).sum(1) / np.linalg.norm(vec_new, axis=1) / np.linalg.norm(vec_old, axis=1)
    promoted = results(client, compare)
    rollback = client.post("/collections/scifact/rollback").json()["job_id"]
    rolled = wait_jobs(client, [rollback])[0]
    restored = results(client, compare)
    return {
        "current_generation": info["generations"]["current"],
        "previous_generation": info["generations"]["previous"],
        "new_documents_in_promoted_generation": sum(d in held for d in new_ids),
        "new_documents_served_after_promotion": served,
        "promoted_generation_documents": len(held),
        "vectors": {
            "passages_checked": int(len(vec_new)),
            "max_abs_diff_promoted_vs_new_embedder": float(np.abs(vec_new - vec_again).max()),
            "max_abs_diff_promoted_vs_previous_generation": float(np.abs(vec_new - vec_old).max()),
            "max_abs_diff_previous_generation_vs_old_embedder": float(np.abs(vec_old - vec_old_again).max()),
            "mean_cosine_promoted_vs_previous_generation": round(float(cos.mean()), 6),
        },
        "rollback_job": rolled["status"],
        "queries_compared": len(compare),
        "promoted_results_differ_from_before": sum(a != b for a, b in zip(promoted, before, strict=True)),
        "rollback_results_identical_to_before": sum(a == b for a, b in zip(restored, before, strict=True)),
    }


def _vectors(coll: Any, doc_id: str) -> np.ndarray:
    """A document's stored passage vectors, in passage order."""
    pids = [p for p, _, _, _ in coll.docstore.document(doc_id).passages]
    return np.stack([next(iter(coll.docstore.batches_after(p - 1, 1))).embeddings[0] for p in pids])


def gate(client: httpx.Client, data: Path, work: Path) -> dict[str, Any]:
    """A gated reindex to a randomly initialised tiny model, judged on SciFact's test queries: refused."""
    from models.registry import ModelRegistry

    folder = data / "datasets" / "scifact"
    (folder / "qrels").mkdir(parents=True)
    shutil.copy(BEIR / "queries.jsonl", folder / "queries.jsonl")
    shutil.copy(BEIR / "qrels" / "test.tsv", folder / "qrels" / "test.tsv")
    tiny = random_bert_encoder(work / "random", hidden=32, heads=2, intermediate=64, max_positions=512, max_length=256)
    ModelRegistry(data / "models").register("random-tiny", tiny)
    body = {"embedder": "random-tiny", "gate": {"dataset": "scifact", "mode": "dense", "tolerance": 0.01}}
    t = time.time()
    job = wait_jobs(client, [client.post("/collections/scifact/reindex", json=body).json()["job_id"]])[0]
    return {
        "request": body,
        "status": job["status"],
        "error": job["error"],
        "result": job["result"],
        "seconds": round(time.time() - t, 1),
        "serving_embedder_after": client.get("/collections/scifact").json()["generations"]["current"],
    }


def generations_on_disk(data: Path) -> dict[str, Any]:
    from indexing import generations as gens

    root = data / "collections" / "scifact"
    leftovers = [p.name for p in (root / gens.GEN_DIR).iterdir() if not p.name.isdigit()]
    return {"generations": gens.on_disk(root), "leftovers": leftovers}


if __name__ == "__main__":
    main()
