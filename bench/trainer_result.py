"""Assemble a trainer's acceptance file: a `vela eval` JSON plus the commands that trained and evaluated it
and the baselines it is compared with (each another `vela eval` JSON, with its own commands).

    python -m bench.trainer_result --eval /tmp/cde.json --model-dir .vela/models/cde-scifact \
        --baseline untrained=bench/results/eval-scifact.json --baseline bi-encoder=/tmp/bi.json:.vela/models/bi \
        --out bench/results/cde-scifact.json

A baseline is NAME=EVAL_JSON[:MODEL_DIR[,MODEL_DIR...]]; with model dirs their training commands are recorded
too. `--model-dir` takes several directories when a model was made in stages (pretraining, then fine-tuning):
their commands are chained in that order. An eval that reranked already holds its own baseline (the same run
without the rerank stage); it is kept under the name "fused".
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

KEEP = (
    "pairs",
    "steps",
    "train_seconds",
    "loss_first",
    "loss_last",
    "mean_negative_similarity_per_epoch",
    "held_out_mlm_loss",
    "data_stats",
    "train_metrics",
    "seconds",
)


def _record(model_dir: str) -> dict[str, Any]:
    return dict(json.loads((Path(model_dir) / "training_args.json").read_text()))


def _commands(eval_json: dict[str, Any], model_dirs: list[str]) -> str:
    return " && ".join([*(_record(m)["command"] for m in model_dirs), eval_json["command"]])


def _training(model_dirs: list[str]) -> dict[str, Any] | None:
    if not model_dirs:
        return None
    return {m: {k: v for k, v in _record(m).items() if k in KEEP} for m in model_dirs}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--eval", required=True, help="the `vela eval --json` output of the trained model")
    p.add_argument("--model-dir", nargs="*", default=[], help="the trained model(s), in training order")
    p.add_argument("--baseline", action="append", default=[], help="NAME=EVAL_JSON[:MODEL_DIR,...] (repeatable)")
    p.add_argument("--note", default=None, help="one line of context kept in the file")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    result = json.loads(Path(args.eval).read_text())
    baselines: dict[str, Any] = {}
    if "baseline" in result:  # a rerank eval: the same run without the rerank stage
        baselines["fused"] = {"metrics": result.pop("baseline"), "command": result["command"]}
    result["command"] = _commands(result, args.model_dir)
    result["training"] = _training(args.model_dir)
    for spec in args.baseline:
        name, _, rest = spec.partition("=")
        path, _, dirs = rest.partition(":")
        model_dirs = [d for d in dirs.split(",") if d]
        b = json.loads(Path(path).read_text())
        baselines[name] = {
            "metrics": b["metrics"],
            "embedder": b.get("embedder"),
            "command": _commands(b, model_dirs),
            "training": _training(model_dirs),
        }
    result["baseline"] = baselines
    if args.note:
        result["note"] = args.note
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(out)
    print(json.dumps({k: result[k] for k in ("dataset", "metrics")}, indent=2))


if __name__ == "__main__":
    main()
