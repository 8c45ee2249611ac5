"""NDCG@10 of the default encoder against torch fp32, per dataset and mode: the quality bar of the fast path.

Each arm runs `vela eval` on a fresh work directory (a reused collection would keep the vectors it was made with):
`torch` is VELA_ENCODER=torch (torch fp32 queries and documents), `default` the settings of a fresh clone (ONNX
Runtime, int8 per token for queries and documents), and with --fp32-documents also VELA_DOCUMENT_PRECISION=fp32.

    vela bench encoder-quality --out bench/results/encoder-quality.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import command, machine, write_result

BEIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir"
ARMS: dict[str, dict[str, str]] = {"torch": {"VELA_ENCODER": "torch"}, "default": {}}
TOLERANCE = 0.005


def _eval(dataset: str, env: dict[str, str], modes: str, work: Path) -> tuple[dict[str, Any], str]:
    out = work / "result.json"
    vela = str(Path(sys.executable).parent / "vela")  # this environment's, activated or not
    args = [vela, "eval", "--data", str(BEIR / dataset), "--modes", modes, "--workdir", str(work / "eval")]
    args += ["--json", str(out)]
    full_env = {k: v for k, v in os.environ.items() if k not in ("VELA_ENCODER", "VELA_DOCUMENT_PRECISION")}
    subprocess.run(args, check=True, env={**full_env, **env}, stdout=subprocess.DEVNULL)
    shown = " ".join([*(f"{k}={v}" for k, v in env.items()), "vela", *args[1:-4], "--workdir", "WORKDIR"])
    return json.loads(out.read_text()), shown


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vela bench encoder-quality", description=__doc__)
    p.add_argument("--datasets", default="scifact,cranfield,cosqa-dev")
    p.add_argument("--modes", default="dense,hybrid")
    p.add_argument("--fp32-documents", action="store_true", help="also the fp32 document graph (one setting away)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    arms = dict(ARMS)
    if args.fp32_documents:
        arms["default_fp32_documents"] = {"VELA_DOCUMENT_PRECISION": "fp32"}
    result: dict[str, Any] = {"what": __doc__.split("\n")[0], "tolerance": TOLERANCE, "datasets": {}, "commands": []}
    for ds in args.datasets.split(","):
        runs: dict[str, Any] = {}
        for arm, env in arms.items():
            with tempfile.TemporaryDirectory(prefix=f"vela-quality-{ds}-{arm}-") as tmp:
                res, shown = _eval(ds, env, args.modes, Path(tmp))
            runs[arm] = {"ndcg@10": {m: v["ndcg@10"] for m, v in res["metrics"].items()}, "seconds": res["seconds"]}
            runs[arm]["fusion"] = res.get("fusion")
            result["commands"].append(shown)
        ref = runs["torch"]["ndcg@10"]
        delta = {arm: {m: round(r["ndcg@10"][m] - ref[m], 4) for m in ref} for arm, r in runs.items() if arm != "torch"}
        within = {arm: all(abs(v) <= TOLERANCE + 1e-9 for v in d.values()) for arm, d in delta.items()}
        result["datasets"][ds] = {"runs": runs, "delta_vs_torch_fp32": delta, "within_tolerance": within}
        print(json.dumps({ds: result["datasets"][ds]}), flush=True)
    result["all_within_tolerance"] = all(all(d["within_tolerance"].values()) for d in result["datasets"].values())
    result["machine"] = machine()
    result["command"] = command()
    if args.out:
        write_result(Path(args.out), result)
    else:
        print(json.dumps(result, indent=2))
    return 0
