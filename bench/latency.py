"""Search latency and throughput through a real uvicorn server, per mode and concurrency, with the Server-Timing
breakdown of every request, against other settings measured in the same run.

Three `vela serve` servers run side by side on loopback over the same SciFact collection (the whole corpus,
ingested once through the API with the default embedder and kept under .vela-bench/):
- `default`: the settings a fresh clone gets (one API process per core up to four, the ONNX Runtime int8
  encoder, micro-batching without a window);
- `one_process`: the same in one API process (VELA_PROCESSES=1), the default before processes;
- `baseline`: one process with the torch fp32 query encoder and micro-batching off (VELA_ENCODER=torch,
  VELA_QUERY_BATCH_MAX=1), the path this bench measured before the default moved to ONNX Runtime.
The arms are measured interleaved (default, one_process, baseline, default, ... for `--rounds` rounds), so load
from other processes falls on all alike; each setting is a closed loop of `concurrency` clients for `--seconds`.
The JSON holds p50/p95/p99 and q/s per arm, the server's CPU per request (all its processes), the p50 of each
Server-Timing stage, the ratios default/other arms, the bare query encoders' p50 (one query per forward pass,
in this process) and the load average at start and end.

    vela bench latency --out bench/results/latency.json [--concurrency 1,8] [--rounds 3] [--seconds 5] [--large]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import command, free_port, machine, start_vela, wait_jobs, wait_ready, write_result

REPO = Path(__file__).resolve().parents[1]
BEIR = REPO.parent / "shared" / "data" / "beir"
CACHE = REPO / ".vela-bench"
MODES: list[tuple[str, str]] = [("bm25", "full"), ("dense", "full"), ("dense", "256"), ("hybrid", "full")]
ARMS: dict[str, dict[str, str]] = {
    "default": {},
    "one_process": {"VELA_PROCESSES": "1"},
    "baseline": {"VELA_ENCODER": "torch", "VELA_QUERY_BATCH_MAX": "1", "VELA_PROCESSES": "1"},
}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


SERVER_PIDS: dict[str, int] = {}  # base URL -> the server process, for its CPU time


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process and of every process under it (`vela serve`'s API processes)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        for task in Path(f"/proc/{pid}/task").iterdir():
            ticks += sum(cpu_ticks(int(c)) for c in (task / "children").read_text().split())
    except OSError:
        return 0
    return ticks


def server_cpu_s(base: str) -> float:
    """CPU seconds (user + system) the server at `base` has used so far, all its processes (Linux /proc; 0
    elsewhere)."""
    if base not in SERVER_PIDS:
        return 0.0
    return cpu_ticks(SERVER_PIDS[base]) / os.sysconf("SC_CLK_TCK")


@contextmanager
def server(data_dir: Path, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    port = free_port()
    env = {"VELA_DATA_DIR": str(data_dir), "VELA_LOG_LEVEL": "WARNING", **(extra_env or {})}
    proc = start_vela(["serve", "--port", str(port)], env)
    base = f"http://127.0.0.1:{port}"
    SERVER_PIDS[base] = proc.pid
    try:
        wait_ready(base, timeout=600)
        yield base
    finally:
        proc.terminate()
        proc.wait(60)


def scifact_data_dir() -> Path:
    """SciFact's whole corpus, ingested through the API with the default embedder once; later runs reuse it."""
    data_dir = CACHE / "scifact-data-default-onnx"
    from indexing.store import CollectionStore

    store = CollectionStore(data_dir)
    if store.exists("scifact") and store.get("scifact").read_versions():
        return data_dir
    docs = [{"id": d["_id"], "title": d["title"], "text": d["text"]} for d in _jsonl(BEIR / "scifact/corpus.jsonl")]
    with server(data_dir) as base, httpx.Client(base_url=base, timeout=120) as client:
        r = client.post("/index", json={"collection": "scifact", "documents": docs})
        r.raise_for_status()
        (job,) = wait_jobs(client, [r.json()["job_id"]], timeout=7200)
        assert job["status"] == "succeeded", job
    return data_dir


def encoder_p50_ms(encoder: str, queries: list[str], n: int = 200) -> float:
    """The bare query encoder, one query per forward pass: the floor under every dense request."""
    from models import EmbedderCache

    embedder = EmbedderCache(encoder=encoder).get("default")
    for q in queries[:10]:
        embedder.encode_queries([q])
    times = []
    for q in (queries * (n // len(queries) + 1))[:n]:
        t0 = time.perf_counter()
        embedder.encode_queries([q])
        times.append(time.perf_counter() - t0)
    return round(float(np.percentile(np.asarray(times) * 1000, 50)), 2)


def parse_server_timing(value: str) -> dict[str, float]:
    out = {}
    for part in value.split(","):
        name, _, dur = part.strip().partition(";dur=")
        if dur:
            out[name] = float(dur)
    return out


def closed_loop(base: str, bodies: list[dict[str, Any]], concurrency: int, seconds: float) -> dict[str, Any]:
    """`concurrency` clients (threads with keep-alive connections) each send the next request as soon as their last
    one answered, for `seconds`; latencies and the Server-Timing stages of every request."""
    latencies: list[float] = []
    stages: list[dict[str, float]] = []
    end = time.perf_counter() + seconds

    def client_loop(offset: int) -> None:
        with httpx.Client(base_url=base, timeout=60) as client:
            i = offset
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                r = client.post("/search", json=bodies[i % len(bodies)])
                r.raise_for_status()
                latencies.append(time.perf_counter() - t0)  # list.append is atomic under the GIL
                stages.append(parse_server_timing(r.headers.get("server-timing", "")))
                i += concurrency

    t0, cpu0, own0 = time.perf_counter(), server_cpu_s(base), time.process_time()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(client_loop, range(concurrency)))
    wall, cpu = time.perf_counter() - t0, server_cpu_s(base) - cpu0
    # This process is the load generator: its CPU while the clients ran (the servers are other processes).
    return {
        "latencies": latencies,
        "stages": stages,
        "wall": wall,
        "server_cpu_s": cpu,
        "client_cpu_s": time.process_time() - own0,
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    lat = np.asarray([x for r in runs for x in r["latencies"]]) * 1000.0
    stages = [s for r in runs for s in r["stages"]]
    names = sorted({k for s in stages for k in s})
    return {
        "requests": int(lat.size),
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p95_ms": round(float(np.percentile(lat, 95)), 2),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "qps": round(lat.size / sum(r["wall"] for r in runs), 1),
        # what one request costs the server in CPU, whatever else runs: on 2 cores, 2000 / this is the most q/s
        # the server could answer with both cores its own and no client beside it
        "server_cpu_ms_per_request": round(1000.0 * sum(r["server_cpu_s"] for r in runs) / max(lat.size, 1), 2),
        # the load generator's share (httpx clients in threads, this process): server + client is what one
        # request costs the machine when both run on it
        "client_cpu_ms_per_request": round(
            1000.0 * sum(r.get("client_cpu_s", 0.0) for r in runs) / max(lat.size, 1), 2
        ),
        "server_timing_p50_ms": {n: round(float(np.median([s.get(n, 0.0) for s in stages])), 3) for n in names},
    }


def measure(
    bases: dict[str, str], collection: str, queries: list[str], concurrencies: list[int], rounds: int, seconds: float
) -> list[dict[str, Any]]:
    """Every mode x concurrency, the arms interleaved round by round."""
    raw: dict[tuple[str, str, int, str], list[dict[str, Any]]] = {}
    for rnd in range(rounds):
        for mode, dim in MODES:
            # dim only where the dense list is searched: the API refuses it in bm25 mode, where it changes nothing
            picks = {"mode": mode, **({"dim": dim} if mode != "bm25" else {})}
            bodies = [{"collection": collection, "query": q, **picks, "k": 10} for q in queries]
            for c in concurrencies:
                for arm, base in bases.items():
                    closed_loop(base, bodies, c, 0.5)  # connections open and caches warm; not counted
                    raw.setdefault((mode, dim, c, arm), []).append(closed_loop(base, bodies, c, seconds))
        print(json.dumps({"round": rnd + 1, "of": rounds, "load": os.getloadavg()}), flush=True)
    rows = []
    for mode, dim in MODES:
        for c in concurrencies:
            row: dict[str, Any] = {"mode": mode, "dim": dim, "concurrency": c}
            for arm in bases:
                row[arm] = summarise(raw[(mode, dim, c, arm)])
            for other in (a for a in bases if a != "default"):
                d, b = row["default"], row[other]
                row[f"p50_ratio_default_vs_{other}"] = round(d["p50_ms"] / b["p50_ms"], 3)
                row[f"qps_ratio_default_vs_{other}"] = round(d["qps"] / b["qps"], 3)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in bases or k == "default"}), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,8", help="comma-separated closed-loop concurrencies")
    ap.add_argument("--seconds", type=float, default=5, help="measured seconds per setting, arm and round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default, baseline) per setting")
    ap.add_argument("--no-baseline", action="store_true", help="measure the default server only")
    ap.add_argument("--large", action="store_true", help="also the >=100k-passage collection (bench.large_corpus)")
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/latency.json")
    args = ap.parse_args(argv)
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    queries = [q["text"] for q in _jsonl(BEIR / "scifact/queries.jsonl")]
    started = {"loadavg_start": os.getloadavg(), "machine": machine()}
    data_dir = scifact_data_dir()
    encoders = {e: encoder_p50_ms(e, queries) for e in ("onnx", "torch")}
    arms: dict[str, dict[str, str]] = {"default": ARMS["default"]} if args.no_baseline else ARMS
    with ExitStack() as stack:  # every server up for the whole measurement: the arms are interleaved
        bases = {arm: stack.enter_context(server(data_dir, env)) for arm, env in arms.items()}
        passages = int(httpx.get(f"{bases['default']}/collections/scifact", timeout=30).json()["passages"])
        tasks = Path(f"/proc/{SERVER_PIDS[bases['default']]}/task").iterdir()
        processes = sum(len((t / "children").read_text().split()) for t in tasks) or 1  # 0 children: it serves
        rows = measure(bases, "scifact", queries, concurrencies, args.rounds, args.seconds)
    out: dict[str, Any] = {
        "collection": "scifact",
        "passages": passages,
        "arms": {"default": "the settings of a fresh clone", **{a: env for a, env in arms.items() if a != "default"}},
        "server_processes_default": processes,
        "results": rows,
        "bare_encoder_p50_ms": encoders,
        "rounds": args.rounds,
        "seconds_per_setting_arm_round": args.seconds,
    }
    if args.large:
        from bench.large_corpus import build_collection, query_texts

        large_dir = CACHE / "large-data"
        name = build_collection(large_dir)
        with server(large_dir) as base:
            out["large"] = measure({"default": base}, name, query_texts(), concurrencies, 1, args.seconds)
    out.update(started, loadavg_end=os.getloadavg(), command=command())
    write_result(args.out, out)


if __name__ == "__main__":
    main()
