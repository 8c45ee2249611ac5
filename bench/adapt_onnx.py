"""An adapted embedder (`vela adapt`) served by its ONNX form against its torch form: export cost, query parity,
single-query latency and NDCG@10.

Where the packaged default runs in ONNX Runtime (VELA_ENCODER auto on a CPU in fp32), an asymmetric model is
exported into the same model cache on first use: its query encoder as the per-token int8 query graph, the base
as the document graphs (models/loading.py `asymmetric_onnx_dir`). This measures what that changes:

- `export_seconds`: the one-off export (into a temporary cache);
- `queries`: cosine of each query's vector, ONNX against torch fp32 (every query of the dataset);
- `latency_batch1`: one query at a time, the two forms interleaved query by query (then each alone);
- `eval`: `vela eval` dense and hybrid NDCG@10 of the model served by each form, each in its own work directory
  (documents and queries both run the form under test), fp32 precision, the fusion each collection chose (shown).

    python -m bench.adapt_onnx --model .vela/adapt-data/models/adapt-scifact --out bench/results/adapt-onnx-scifact.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.common import command, machine, write_result
from bench.onnx_parity import SCIFACT, read_queries, single_query_latency
from models import EmbedderCache


def vela_eval(model: Path, data: Path, work: Path, env: dict[str, str]) -> dict[str, Any]:
    out = work / "eval.json"
    argv = [sys.executable, "-m", "cli.main", "eval", "--data", str(data), "--modes", "dense,hybrid"]
    argv += ["--precision", "fp32", "--embedder", str(model), "--workdir", str(work), "--json", str(out)]
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    # The fusion the eval collection chose for itself: hybrid figures move with it, not only with the vectors.
    (settings,) = (work / "collections").glob("*/collection.json")
    fusion = {k: v for k, v in (json.loads(settings.read_text()).get("fusion") or {}).items() if k != "chosen"}
    return {
        "metrics": result["metrics"],
        "fusion": fusion,
        "collection": settings.parent.name,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def hybrid_at_each_others_fusion(evals: dict[str, Any], data: Path, works: dict[str, Path]) -> dict[str, Any]:
    """Each form's hybrid NDCG@10 at the fusion the other form's collection chose (a request's override): the
    vectors' own effect, apart from a different choice of fusion."""
    from bench.adapt_scoring import scores_with_fusion

    other = {"torch": "onnx", "onnx": "torch"}
    return {
        form: scores_with_fusion(
            works[form], str(data), e["collection"], evals[other[form]]["fusion"], precision="fp32", encoder=form
        )["ndcg@10"]
        for form, e in evals.items()
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="an asymmetric model directory (vela adapt's)")
    ap.add_argument("--data", type=Path, default=SCIFACT, help="BEIR folder")
    ap.add_argument("--latency-queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--no-eval", action="store_true", help="parity and latency only")
    ap.add_argument("--out", type=Path, default=Path("bench/results/adapt-onnx-scifact.json"))
    args = ap.parse_args(argv)
    model = args.model.resolve()

    queries = read_queries(args.data)
    with tempfile.TemporaryDirectory(prefix="vela-adapt-onnx-") as tmp:
        cache = Path(tmp) / "cache"
        os.environ["VELA_MODEL_CACHE"] = str(cache)
        t0 = time.perf_counter()
        onnx_cache = EmbedderCache(encoder="onnx")
        onnx_dir = onnx_cache.served_dir(model)
        export_s = time.perf_counter() - t0
        backends = {"torch": EmbedderCache(encoder="torch").get(model), "onnx": onnx_cache.get(model)}
        cos = (backends["torch"].encode_queries(queries) * backends["onnx"].encode_queries(queries)).sum(1)  # (n,)
        timed = queries[: args.latency_queries]
        latency = single_query_latency(backends, timed, args.warmup, interleave=True)
        latency_alone = single_query_latency(backends, timed, args.warmup, interleave=False)
        evals: dict[str, Any] = {}
        crossed: dict[str, Any] = {}
        if not args.no_eval:
            works = {form: Path(tmp) / f"eval-{form}" for form in ("torch", "onnx")}
            for form, work in works.items():
                env = {"VELA_ENCODER": form, "VELA_MODEL_CACHE": str(cache)}
                evals[form] = vela_eval(model, args.data, work, env)
            if evals["torch"]["fusion"] != evals["onnx"]["fusion"]:
                crossed = hybrid_at_each_others_fusion(evals, args.data, works)
        files = sorted(p.name for p in onnx_dir.iterdir())

    result: dict[str, Any] = {
        "dataset": args.data.name,
        "model": model.name,
        "export_seconds": round(export_s, 1),
        "onnx_files": files,
        "onnx_precision": backends["onnx"].precision,
        "queries": {
            "n": len(queries),
            "cosine_min": round(float(cos.min()), 5),
            "cosine_mean": round(float(cos.mean()), 5),
            "cosine_p1": round(float(np.percentile(cos, 1)), 5),
        },
        "latency_batch1": {"queries": len(timed), **latency},
        "latency_batch1_each_alone": {"queries": len(timed), **latency_alone},
    }
    if evals:
        result["eval"] = evals
        result["ndcg@10_onnx_minus_torch"] = {
            mode: round(evals["onnx"]["metrics"][mode]["ndcg@10"] - evals["torch"]["metrics"][mode]["ndcg@10"], 4)
            for mode in ("dense", "hybrid")
        }
    if crossed:  # the two collections chose different fusions: each one's hybrid at the other's
        result["hybrid_ndcg@10_at_the_other_forms_fusion"] = crossed
    result.update({"threads": torch.get_num_threads(), "machine": machine(), "command": command()})
    write_result(args.out, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
