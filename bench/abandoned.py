"""The work a server does for requests whose client has gone: batch searches of long queries sent over a raw socket
and abandoned (the socket closed) once sent, against the same request answered to a client that waits for it.

One `vela serve` (one process, the default encoder) over a two-document collection. Each round sends `--requests`
batch searches of 256 queries of 150 words (about 234,000 characters: what one request may carry), closes each
socket 0.3 s after sending it, then measures the server's CPU seconds until it is idle again (under 0.05 s of CPU
in a second). The reference is one such request sent by a client that reads the answer: its CPU seconds, and the
`encode` stage of its Server-Timing. The ratio `abandoned_cpu_per_request / answered_cpu` is what an abandoned
request costs as a share of what answering it costs: near 0 when the server stops at the client's departure, near
1 when it computes the answer for nobody.

    vela bench abandoned --out bench/results/abandoned.json [--requests 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import command, machine, write_result
from bench.latency import server, server_cpu_s

WORDS = ["alpha", "beta", "gamma", "delta", "protein", "cell", "gene", "tumor", "insulin", "magma"]


def _body(seed: int) -> bytes:
    rng = random.Random(seed)
    queries = [" ".join(rng.choice(WORDS) for _ in range(150)) for _ in range(256)]
    return json.dumps({"collection": "ab", "queries": queries, "mode": "dense", "k": 10}).encode()


def _until_idle(base: str, limit_s: float = 300.0) -> tuple[float, float]:
    """(CPU seconds, wall seconds) the server spends from now until a second in which it uses under 0.05 s."""
    c0, t0 = server_cpu_s(base), time.monotonic()
    prev = c0
    while time.monotonic() - t0 < limit_s:
        time.sleep(1.0)
        now = server_cpu_s(base)
        if now - prev < 0.05:
            return round(now - c0, 2), round(time.monotonic() - t0, 1)
        prev = now
    return round(server_cpu_s(base) - c0, 2), round(time.monotonic() - t0, 1)


def abandoned(base: str, requests: int, seed: int) -> dict[str, Any]:
    port = int(base.rsplit(":", 1)[1])
    c0 = server_cpu_s(base)
    for i in range(requests):
        body = _body(seed + i)
        head = (
            f"POST /search/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
        )
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(head.encode() + b"\r\n\r\n" + body)
            time.sleep(0.3)
    cpu, wall = _until_idle(base)
    total = round(server_cpu_s(base) - c0, 2)
    return {"requests": requests, "cpu_s": total, "cpu_after_last_close_s": cpu, "busy_after_last_close_s": wall}


def answered(base: str, seed: int) -> dict[str, Any]:
    c0 = server_cpu_s(base)
    with httpx.Client(base_url=base, timeout=600) as client:
        r = client.post("/search/batch", content=_body(seed), headers={"content-type": "application/json"})
    r.raise_for_status()
    timing = dict(p.split(";dur=") for p in r.headers["server-timing"].split(", "))
    _until_idle(base)
    return {"cpu_s": round(server_cpu_s(base) - c0, 2), "encode_ms": float(timing["encode"])}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=Path(".vela-bench/abandoned"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/abandoned.json"))
    args = ap.parse_args(argv)
    import shutil

    shutil.rmtree(args.workdir, ignore_errors=True)
    rounds = []
    with server(args.workdir, {"VELA_PROCESSES": "1"}) as base:
        docs = [{"id": "a", "text": "insulin and cells"}, {"id": "b", "text": "magma under the crust"}]
        with httpx.Client(base_url=base, timeout=120) as client:
            job = client.post("/index", json={"collection": "ab", "documents": docs}).json()["job_id"]
            while client.get(f"/jobs/{job}").json()["status"] in ("queued", "running"):
                time.sleep(0.2)
        _until_idle(base)
        for r in range(args.rounds):
            rounds.append({"answered": answered(base, 1000 + r), "abandoned": abandoned(base, args.requests, 100 * r)})
    per_abandoned = [x["abandoned"]["cpu_s"] / args.requests for x in rounds]
    per_answered = [x["answered"]["cpu_s"] for x in rounds]
    result = {
        "bench": "abandoned",
        "rounds": rounds,
        "abandoned_cpu_per_request_s": round(sum(per_abandoned) / len(per_abandoned), 2),
        "answered_cpu_s": round(sum(per_answered) / len(per_answered), 2),
        "ratio_abandoned_to_answered": round(sum(per_abandoned) / sum(per_answered), 3),
        "command": command(),
        "machine": machine(),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
