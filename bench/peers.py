"""Vela against the embedded engines a user would pick instead: LanceDB, Qdrant local mode and Chroma.

Every system gets the same passages, the same passage vectors and the same query vectors:
- passages: a BEIR corpus (default SciFact) ingested by `vela ingest` with the defaults (chunking, embedder,
  the fusion chosen after ingest) into a collection kept under .vela-bench/; the passages are then read back
  from that collection (title + passage text, as Vela's BM25 and encoder see them) with their stored vectors;
- query vectors: the collection's query encoder as the server loads it (for the packaged MiniLM, ONNX Runtime
  int8 unless VELA_ENCODER says otherwise), each test query encoded alone (as the server encodes a lone
  request) once, before anything is timed.

Peers, each built in this process from those passages and vectors (`pip install .[peers]`, `make install-peers`):
- LanceDB: a table (pid, doc, text, vector) with its native full-text index on text; dense = flat (exhaustive)
  cosine search, bm25 = its FTS, hybrid = FTS + vector fused by its RRFReranker;
- Qdrant local mode (qdrant-client, in memory): dense, cosine;
- Chroma (in memory, HNSW, cosine): dense; measured when chromadb is importable. It is not in the extra: its
  uvicorn[standard] dependency installs uvloop, which `vela serve` would then run on, so it is best put on
  PYTHONPATH from a directory of its own (pip install --target DIR --no-deps chromadb and its dependencies
  other than uvicorn's extras); the JSON's command then carries that PYTHONPATH.
Peers return passages; each asks for `--peer-limit` passages (about two passages per SciFact document) and its
first 10 distinct documents are its answer. Vela returns documents (its best passage each) itself.

Engine only, per mode: Vela's engine call (indexing.engine.search, one query per call, the request the service
builds: k 10, grouped by document, the collection's fusion; in hybrid also with plain RRF, `vela_rrf`) against
each peer's search call, with the pre-encoded query vector. For every query the systems take turns (the order
rotates from query to query) and the whole pass runs `--rounds` times, so load from other processes falls on
all alike. NDCG@10 (ir-measures) of every system and mode, from the qrels of the split.

End to end, per mode, with the same encoder: Vela through HTTP (a `vela serve` subprocess on loopback over the
collection, POST /search, one request at a time) against LanceDB in this process (encode the query with the same
encoder, then search, returning document id and text as Vela's response does), interleaved the same way; for
Vela also the p50 of each Server-Timing stage, and of the time outside the server (HTTP client and loopback).
The JSON records the peers' versions, the CPU, the load average at start, after each phase and at the end, and
the commit measured with the search-path files changed since.

    vela bench peers --out bench/results/peers.json [--rounds 3] [--peer-limit 20] [--peers lancedb,qdrant,chroma]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import command, cpu_model, machine, write_result
from bench.peer_systems import (
    MODES,
    PEER_MODES,
    Chroma,
    Corpus,
    K,
    Lance,
    Qdrant,
    Search,
    Vela,
    available,
    ensure_collection,
    first_docs,
    ndcg10,
    versions,
)

REPO = Path(__file__).resolve().parents[1]
BEIR = REPO.parent / "shared" / "data" / "beir"
CACHE = REPO / ".vela-bench"
PEERS: tuple[str, ...] = ("lancedb", "qdrant", "chroma")


# ---- measurement ---------------------------------------------------------------------------------------------


def interleaved(
    systems: dict[str, Search], n: int, rounds: int, warm: int = 10
) -> tuple[dict[str, list[float]], dict[str, list[list[str]]]]:
    """Every query searched by every system in turn (the order rotating per query and round), `rounds` times;
    latencies (s) per system and each system's answers from the first round."""
    names = list(systems)
    for name in names:  # first calls (caches, lazy set-up) are not counted
        for qi in range(min(warm, n)):
            systems[name](qi)
    times: dict[str, list[float]] = {s: [] for s in names}
    answers: dict[str, list[list[str]]] = {s: [] for s in names}
    for r in range(rounds):
        for qi in range(n):
            shift = (qi + r) % len(names)
            for name in names[shift:] + names[:shift]:
                t0 = time.perf_counter()
                docs = systems[name](qi)
                times[name].append(time.perf_counter() - t0)
                if r == 0:
                    answers[name].append(docs)
    return times, answers


def stats(latencies: list[float]) -> dict[str, float]:
    ms = np.asarray(latencies) * 1000.0
    return {
        "searches": int(ms.size),
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "mean_ms": round(float(ms.mean()), 3),
    }


LOADS: list[dict[str, Any]] = []  # the load average after each measured mode, as the run went


def measure(
    systems_by_mode: dict[str, dict[str, Search]], corpus: Corpus, rounds: int, phase: str
) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for mode, systems in systems_by_mode.items():
        times, answers = interleaved(systems, len(corpus.qids), rounds)
        out[mode] = {}
        for name in systems:
            runs = dict(zip(corpus.qids, answers[name], strict=True))
            out[mode][name] = {**stats(times[name]), "ndcg@10": ndcg10(corpus.qrels, runs)}
        LOADS.append({"phase": phase, "mode": mode, "loadavg": [round(x, 2) for x in os.getloadavg()]})
        print(json.dumps({"phase": phase, "mode": mode, **out[mode], "load": LOADS[-1]["loadavg"]}), flush=True)
    return out


def end_to_end(
    data_dir: Path, name: str, corpus: Corpus, lance: Lance, encoder: Any, rounds: int
) -> dict[str, dict[str, dict[str, Any]]]:
    """Vela over HTTP (a `vela serve` subprocess) vs LanceDB in this process with the same query encoder; for
    Vela also the p50 of each Server-Timing stage and of what lies outside the server (client and loopback)."""
    import httpx

    from bench.latency import parse_server_timing, server

    stages: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    totals: dict[str, list[float]] = {m: [] for m in MODES}
    with ExitStack() as stack:
        base = stack.enter_context(server(data_dir))
        client = stack.enter_context(httpx.Client(base_url=base, timeout=60))
        by_mode: dict[str, dict[str, Search]] = {}
        for mode in MODES:

            def vela(qi: int, mode: str = mode) -> list[str]:
                body = {"collection": name, "query": corpus.queries[qi], "mode": mode, "k": K}
                t0 = time.perf_counter()
                r = client.post("/search", json=body)
                r.raise_for_status()
                totals[mode].append(time.perf_counter() - t0)
                stages[mode].append(parse_server_timing(r.headers.get("server-timing", "")))
                return [h["id"] for h in r.json()["hits"]]

            def lancedb(qi: int, mode: str = mode) -> list[str]:
                text = corpus.queries[qi]
                vec = encoder.encode_queries([text])[0] if mode != "bm25" else None
                out = lance.query(mode, text, vec, ["doc", "text"])
                return first_docs(out.column("doc").to_pylist())

            by_mode[mode] = {"vela_http": vela, "lancedb_inprocess": lancedb}
        out = measure(by_mode, corpus, rounds, "end_to_end")
    for mode in MODES:
        seen = stages[mode]
        names = sorted({k for st in seen for k in st})
        p50 = {n: round(float(np.median([st.get(n, 0.0) for st in seen])), 3) for n in names}
        outside = [t * 1000 - st.get("total", 0.0) for t, st in zip(totals[mode], seen, strict=True)]
        p50["outside_server"] = round(float(np.median(outside)), 3)
        out[mode]["vela_http"]["server_timing_p50_ms"] = p50
    return out


def revision() -> dict[str, Any]:
    """The commit measured, and the files of the search path (indexing, service, models) changed since it."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "indexing", "service", "models"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {"commit": head.stdout.strip(), "uncommitted": [line[3:] for line in dirty.stdout.splitlines()]}


def exact_command() -> str:
    """`command()`, with the PYTHONPATH it ran under (how Chroma is made importable outside the extra)."""
    path = os.environ.get("PYTHONPATH")
    return f"PYTHONPATH={path} {command()}" if path else command()


def ratio(slow: float, fast: float) -> float:
    return round(slow / fast, 2) if fast > 0 else float("inf")


def summary(engine: dict[str, Any], e2e: dict[str, Any] | None) -> dict[str, Any]:
    """Peer p50 / Vela p50 (above 1: Vela faster) per mode and peer, and the two targets."""
    out: dict[str, Any] = {"engine_p50_speedup": {}, "engine_p99_speedup": {}}
    for mode, systems in engine.items():
        v = systems["vela"]
        for name, s in systems.items():
            if not name.startswith("vela"):
                out["engine_p50_speedup"][f"{mode}:{name}"] = ratio(s["p50_ms"], v["p50_ms"])
                out["engine_p99_speedup"][f"{mode}:{name}"] = ratio(s["p99_ms"], v["p99_ms"])
    hy = engine.get("hybrid", {})
    if "lancedb" in hy:
        out["target_hybrid_engine_3x_at_equal_ndcg"] = {
            "speedup_p50": ratio(hy["lancedb"]["p50_ms"], hy["vela"]["p50_ms"]),
            "ndcg@10_vela": hy["vela"]["ndcg@10"],
            "ndcg@10_lancedb": hy["lancedb"]["ndcg@10"],
            "met": hy["lancedb"]["p50_ms"] >= 3 * hy["vela"]["p50_ms"]
            and hy["vela"]["ndcg@10"] >= hy["lancedb"]["ndcg@10"],
        }
    if e2e:
        per = {m: ratio(s["lancedb_inprocess"]["p50_ms"], s["vela_http"]["p50_ms"]) for m, s in e2e.items()}
        out["target_e2e_vela_http_faster_every_mode"] = {
            "speedup_p50": per,
            "speedup_p99": {
                m: ratio(s["lancedb_inprocess"]["p99_ms"], s["vela_http"]["p99_ms"]) for m, s in e2e.items()
            },
            "met": all(r > 1 for r in per.values()),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=BEIR / "scifact", help="BEIR folder (corpus, queries, qrels)")
    ap.add_argument("--split", default="test", help="qrels split: its queries are searched and scored")
    ap.add_argument("--workdir", type=Path, default=None, help="Vela data dir (default .vela-bench/peers-<data>)")
    ap.add_argument("--embedder", default=None, help="embedder of the collection (default: Vela's default)")
    ap.add_argument("--max-docs", type=int, default=None, help="only the first N documents of the corpus")
    ap.add_argument("--max-queries", type=int, default=0, help="only the first N judged queries (0: all)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved passes over the queries")
    ap.add_argument("--peer-limit", type=int, default=20, help="passages each peer returns (deduplicated to 10)")
    ap.add_argument("--peers", default=",".join(PEERS), help="which peers, of those importable")
    ap.add_argument("--no-e2e", action="store_true", help="engine only (no server)")
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/peers.json")
    args = ap.parse_args(argv)

    from indexing.store import CollectionStore
    from models import EmbedderCache
    from velaio.beir import read_qrels, read_queries

    load_start = os.getloadavg()
    tag = args.data.name + (f"-{args.max_docs}" if args.max_docs else "")
    data_dir = args.workdir or CACHE / f"peers-{tag}"
    name = args.data.name
    ensure_collection(args.data, data_dir, name, args.embedder, args.max_docs)
    coll = CollectionStore(data_dir).get(name)
    corpus = Corpus.read(coll, read_queries(args.data), read_qrels(args.data, args.split), args.max_queries)
    cache = EmbedderCache()
    encoder = cache.get(coll.settings.embedder)
    # One query per forward pass, as the server encodes a lone request (int8 activations are quantized per batch).
    qvecs = np.concatenate([np.asarray(encoder.encode_queries([q]), dtype=np.float32) for q in corpus.queries])
    peers = available([p for p in args.peers.split(",") if p])
    missing = sorted(set(args.peers.split(",")) - set(peers) - {""})
    print(json.dumps({"passages": len(corpus.pids), "queries": len(corpus.qids), "peers": peers}), flush=True)

    with tempfile.TemporaryDirectory(prefix="vela-peers-") as tmp:
        vela = Vela(coll, corpus, qvecs)
        built: dict[str, Any] = {}
        build_s: dict[str, float] = {}
        for p in peers:
            t0 = time.perf_counter()
            if p == "lancedb":
                built[p] = Lance(Path(tmp) / "lance", corpus, qvecs, args.peer_limit)
            elif p == "qdrant":
                built[p] = Qdrant(corpus, qvecs, args.peer_limit)
            else:
                built[p] = Chroma(corpus, qvecs, args.peer_limit)
            build_s[p] = round(time.perf_counter() - t0, 2)
        by_mode = {
            m: {"vela": vela.searcher(m), **{p: s.searcher(m) for p, s in built.items() if m in PEER_MODES[p]}}
            for m in MODES
        }
        by_mode["hybrid"]["vela_rrf"] = vela.searcher("hybrid-rrf")
        engine = measure(by_mode, corpus, args.rounds, "engine")
        e2e = None
        if not args.no_e2e and "lancedb" in built:
            e2e = end_to_end(data_dir, name, corpus, built["lancedb"], encoder, args.rounds)

    result: dict[str, Any] = {
        "benchmark": "peers",
        "data": str(args.data),
        "collection": {"data_dir": str(data_dir), "name": name, "created_at": coll.settings.created_at},
        "split": args.split,
        "passages": len(corpus.pids),
        "documents": len(set(corpus.docs)),
        "queries": len(corpus.qids),
        "rounds": args.rounds,
        "k": K,
        "peer_limit": args.peer_limit,
        "query_encoder": str(cache.served_dir(coll.settings.embedder)),
        "collection_embedder": coll.settings.embedder,
        "vela_fusion": vela.fusion,
        "peers": peers,
        "peers_not_installed": missing,
        "peer_build_s": build_s,
        "engine": engine,
        "end_to_end": e2e,
        "summary": summary(engine, e2e),
        "versions": versions(peers),
        "cpu_model": cpu_model()["model"],
        "machine": machine(),
        "loadavg_start": [round(x, 2) for x in load_start],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "loadavg_by_phase": LOADS,
        "vela_revision": revision(),
        "command": exact_command(),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
