"""End-to-end ingest throughput against the bare encoder on the same texts, default encoder vs torch fp32.

The same N short documents (SciFact sentences: one passage each) go through
1. the bare encoders in this process: `encode_documents` on the passage texts, nothing else: the default (ONNX
   Runtime; documents through the int8 graph quantized per token), the same with VELA_DOCUMENT_PRECISION=fp32
   (the fp32 document graph, the default before), torch fp32 and torch bf16 (autocast; whether bf16 pays
   depends on the CPU: AMX, or not), interleaved over `--bare-rounds` rounds;
2. the product: `POST /index` to a real `vela serve` (embedded default: the in-process worker chunks, embeds,
   stores and publishes the indexes), timed from the request to the job's success; with the default settings,
   with VELA_DOCUMENT_PRECISION=fp32 and with VELA_ENCODER=torch (how ingest ran before ONNX), interleaved per
   round.
Ratios: product / bare encoder per arm, default / torch and default / fp32 documents. The growth of the server's
peak RSS per 100k passages (from two half-size jobs) comes along, and the load average at start and end.

    vela bench ingest --docs 4000 --out bench/results/ingest.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
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


ENCODERS = {
    "onnx-default": ("onnx", "fp32"),
    "onnx-fp32-documents": ("onnx", "fp32"),  # the same export, its fp32 document graph
    "torch-fp32": ("torch", "fp32"),
    "torch-bf16": ("torch", "bf16"),
}
ARMS = {"default": {}, "fp32-documents": {"VELA_DOCUMENT_PRECISION": "fp32"}, "torch": {"VELA_ENCODER": "torch"}}


def bare_encoders_docs_per_s(texts: list[str], rounds: int) -> dict[str, float]:
    """docs/s of each bare encoder on `texts`, the median over interleaved rounds."""
    from models import EmbedderCache
    from models.embedder.onnx_embedder import OnnxEmbedder
    from models.loading import packaged_onnx_dir

    embedders = {
        name: EmbedderCache(encoder=encoder, precision=precision).get("default")
        for name, (encoder, precision) in ENCODERS.items()
        if name != "onnx-fp32-documents"
    }
    embedders["onnx-fp32-documents"] = OnnxEmbedder.from_dir(packaged_onnx_dir(), document_precision="fp32")
    rates: dict[str, list[float]] = {name: [] for name in embedders}
    for e in embedders.values():
        e.encode_documents(texts[:64])  # warm up
    for _ in range(rounds):
        for name, e in embedders.items():
            t0 = time.perf_counter()
            e.encode_documents(texts)
            rates[name].append(len(texts) / (time.perf_counter() - t0))
    return {name: round(float(sorted(r)[len(r) // 2]), 1) for name, r in rates.items()}


def ingest_once(docs: list[dict[str, str]], env: dict[str, str]) -> dict[str, Any]:
    """POST /index of `docs` (two half-size jobs) to a fresh `vela serve`: docs/s and peak RSS after each job."""
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="vela-bench-ingest-"))
    proc = start_vela(["serve", "--port", str(port)], {"VELA_DATA_DIR": str(data), "VELA_LOG_LEVEL": "WARNING", **env})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, timeout=600)
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
    finally:
        proc.terminate()
        proc.wait(60)
        shutil.rmtree(data, ignore_errors=True)
    slope_mb = (peaks[1] - peaks[0]) / max(passages_after[1] - passages_after[0], 1)
    return {
        "docs": info["documents"],
        "passages": info["passages"],
        "seconds": round(seconds, 1),
        "docs_per_s": round(info["documents"] / seconds, 1),
        "peak_rss_mb": [round(x, 1) for x in peaks],
        "slope_mb": slope_mb,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument(
        "--rounds", type=int, default=1, help="interleaved rounds of (default, fp32-documents, torch) server ingests"
    )
    ap.add_argument("--bare-texts", type=int, default=1000, help="texts each bare encoder embeds per round")
    ap.add_argument("--bare-rounds", type=int, default=3, help="interleaved rounds of the bare encoders")
    ap.add_argument("--out", type=Path, default=Path("bench/results/ingest.json"))
    args = ap.parse_args(argv)
    started = {"loadavg_start": os.getloadavg(), "machine": machine()}
    docs = short_documents(args.docs)
    encoders = bare_encoders_docs_per_s([d["text"] for d in docs[: args.bare_texts]], rounds=args.bare_rounds)
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for _ in range(args.rounds):
        for arm, env in ARMS.items():
            runs[arm].append(ingest_once(docs, env))
            print(json.dumps({"arm": arm, **runs[arm][-1]}), flush=True)
    best = {arm: max(r, key=lambda x: x["docs_per_s"]) for arm, r in runs.items()}
    default, torch_arm, fp32_docs = best["default"], best["torch"], best["fp32-documents"]
    result: dict[str, Any] = {
        "docs": default["docs"],
        "passages": default["passages"],
        "seconds": default["seconds"],
        "docs_per_s": default["docs_per_s"],
        "torch_docs_per_s": torch_arm["docs_per_s"],
        "fp32_documents_docs_per_s": fp32_docs["docs_per_s"],
        "ratio_default_vs_torch": round(default["docs_per_s"] / torch_arm["docs_per_s"], 3),
        "ratio_default_vs_fp32_documents": round(default["docs_per_s"] / fp32_docs["docs_per_s"], 3),
        "ratio_vs_recorded_101_6": round(default["docs_per_s"] / 101.6, 3),
        "bare_encoder_docs_per_s": encoders,
        "ratio_vs_bare_encoder": round(default["docs_per_s"] / encoders["onnx-default"], 3),
        "fp32_documents_ratio_vs_bare_encoder": round(fp32_docs["docs_per_s"] / encoders["onnx-fp32-documents"], 3),
        "bare_default_vs_fp32_documents": round(encoders["onnx-default"] / encoders["onnx-fp32-documents"], 3),
        "torch_ratio_vs_bare_encoder": round(torch_arm["docs_per_s"] / encoders["torch-fp32"], 3),
        "bf16_vs_fp32_torch_encoder": round(encoders["torch-bf16"] / encoders["torch-fp32"], 3),
        **rss_per_100k(default["slope_mb"]),
        "peak_rss_mb": default["peak_rss_mb"],
        "runs": {arm: [{k: v for k, v in x.items() if k != "slope_mb"} for x in r] for arm, r in runs.items()},
        "arms": {
            "default": "the settings of a fresh clone (ONNX Runtime: int8 queries, documents int8 per token)",
            "fp32-documents": ARMS["fp32-documents"],
            "torch": ARMS["torch"],
        },
        "note": "server ingest: best of --rounds per arm; bare encoders: median of --bare-rounds interleaved rounds "
        "on the first --bare-texts texts",
        **started,
        "loadavg_end": os.getloadavg(),
        "command": command(),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
