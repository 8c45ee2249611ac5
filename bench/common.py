"""Shared pieces of the benchmarks: local servers on loopback, closed-loop HTTP load, percentiles, output."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from velaio.machine import cpu_model, machine  # noqa: F401  (benchmarks import them from here)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command() -> str:
    """The command line that re-runs this benchmark, as typed (`vela bench ...` or `python -m bench.x ...`)."""
    prog = Path(sys.argv[0])
    head = [f"python -m bench.{prog.stem}"] if prog.parent.name == "bench" else [prog.name]
    return " ".join([*head, *(shlex.quote(a) for a in sys.argv[1:])])


def start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "yes", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    return proc, f"redis://127.0.0.1:{port}/0"


def start_vela(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "cli.main", *args], env={**os.environ, **env})


def wait_ready(base: str, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{base} not ready")


def wait_jobs(client: httpx.Client, job_ids: list[str], timeout: float = 3600) -> list[dict[str, Any]]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        jobs = [client.get(f"/jobs/{j}").json() for j in job_ids]
        if all(j["status"] in ("succeeded", "failed", "cancelled") for j in jobs):
            return jobs
        time.sleep(0.5)
    raise TimeoutError(job_ids)


def percentiles(latencies_s: list[float]) -> dict[str, float]:
    ms = np.asarray(latencies_s) * 1000.0
    return {
        "requests": len(ms),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p95_ms": round(float(np.percentile(ms, 95)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
    }


async def closed_loop(
    base: str, make_body: Callable[[int], dict[str, Any]], *, concurrency: int, until: Callable[[], bool]
) -> tuple[list[float], float]:
    """`concurrency` clients each send a request as soon as their last one answered, until `until()`.

    Each client is a thread with its own keep-alive `httpx.Client`: the sync client costs about a third of
    the asyncio one per request (2.2 vs 5.2 ms for a 0.4 ms BM25 search here), so the driver, which
    shares the machine with the server, adds less to what it measures. Awaitable, for the callers' sake.
    """
    latencies: list[float] = []
    counter = itertools.count()
    lock = threading.Lock()

    def client_loop() -> None:
        with httpx.Client(base_url=base, timeout=60) as client:
            while not until():
                body = make_body(next(counter))
                t0 = time.perf_counter()
                r = client.post("/search", json=body)
                r.raise_for_status()
                with lock:
                    latencies.append(time.perf_counter() - t0)

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        await asyncio.gather(*(asyncio.wrap_future(pool.submit(client_loop)) for _ in range(concurrency)))
    return latencies, time.perf_counter() - start


def write_result(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def random_bert_encoder(
    root: Path, *, hidden: int, heads: int, intermediate: int, max_positions: int, max_length: int
) -> Path:
    """A random 1-layer BERT embedder with the packaged MiniLM tokenizer, saved as a model directory: encoder
    cost without a download (the speed of its shape, not its quality, is what the benches need)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from models import EmbedderConfig
    from models.loading import packaged_minilm_dir

    tok = AutoTokenizer.from_pretrained(packaged_minilm_dir(), local_files_only=True)
    config = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=1,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=max_positions,
    )
    BertModel(config).save_pretrained(root)
    tok.save_pretrained(root)
    EmbedderConfig(pooling="mean", max_length=max_length).save(root)
    return root
